"""Loopback HTTP servers that speak just enough of Ollama's API and OpenAI's embedding API."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dspy_memory.embed import HashEmbedder


@contextmanager
def _serving(handler):
    """Serve `handler` on a free loopback port while the block runs; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def embedding_server(kind: str, *, dim: int = 32, behaviour: str = "ok"):
    """kind: "ollama" (POST /api/embed) or "openai" (POST /v1/embeddings). behaviour: "ok",
    "error" (HTTP 500), "wrong-dim" or "not-numbers". Yields (base_url, list of requests)."""
    model = HashEmbedder(dim, cache_size=0)
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return None

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = model.embed(texts).tolist()
            if behaviour == "wrong-dim":
                vectors = [vector[:-1] for vector in vectors]
            if behaviour == "not-numbers":
                vectors = [["x"] * dim for _ in vectors]
            if behaviour == "error":
                self.send_response(500)
                self.end_headers()
                self.wfile.write(b'{"error": "model exploded"}')
                return
            if kind == "ollama" and self.path == "/api/embed":
                payload = {"model": body["model"], "embeddings": vectors}
            elif kind == "openai" and self.path == "/v1/embeddings":
                payload = {
                    "object": "list",
                    "model": body["model"],
                    "data": [
                        {"object": "embedding", "index": i, "embedding": v}
                        for i, v in reversed(list(enumerate(vectors)))
                    ],
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with _serving(Handler) as url:
        yield url, requests


# What Ollama before 0.5.0 answers to a JSON schema in `format` (it took only "json" there).
OLD_OLLAMA_FORMAT_ERROR = (
    "json: cannot unmarshal object into Go struct field ChatRequest.format of type string"
)


def _version(text):
    return tuple(int(part) for part in text.split("-")[0].split("."))


@contextmanager
def ollama_server(
    *,
    models=("llama3.2:latest", "nomic-embed-text:latest"),
    chat=None,
    reply_to=None,
    dim: int = 768,
    version: str = "0.6.2",
    reports_version: bool = True,
    context_length: int = 131072,
):
    """A loopback server speaking the parts of Ollama's API dspy-memory uses: GET /api/tags and
    /api/version, POST /api/show (the model's trained context length), /api/embed,
    and chat on the native POST /api/chat and the OpenAI-compatible POST /v1/chat/completions.
    Chat is answered by `chat(messages) -> str` (see `chat_by_signature`) or, given instead,
    `reply_to(request_body) -> str`, which sees `format` and `options` too. Like Ollama before
    0.5.0, a `version` below 0.5.0 refuses a JSON schema in `format` (HTTP 400);
    reports_version=False serves no /api/version. Yields (base_url, list of requests: path and JSON body)."""
    model = HashEmbedder(dim, cache_size=0)
    requests: list[dict] = []
    pulled = {name.removesuffix(":latest") for name in models} | set(models)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return None

        def _send(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, body):
            return reply_to(body) if reply_to is not None else chat(body["messages"])

        def do_GET(self):  # noqa: N802
            requests.append({"path": self.path})
            if self.path == "/api/tags":
                self._send(200, {"models": [{"name": name, "model": name} for name in models]})
            elif self.path == "/api/version" and reports_version:
                self._send(200, {"version": version})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "body": body})
            if self.path == "/api/embed":
                if body["model"] not in pulled:
                    self._send(404, {"error": f'model "{body["model"]}" not found, try pulling it first'})
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                self._send(200, {"model": body["model"], "embeddings": model.embed(texts).tolist()})
            elif self.path == "/api/show":
                name = body.get("model") or body.get("name")  # older clients send "name"
                if name not in pulled:
                    self._send(404, {"error": f"model '{name}' not found"})
                    return
                self._send(
                    200,
                    {
                        "parameters": 'stop "<|eot_id|>"',
                        "details": {"format": "gguf", "family": "llama"},
                        "model_info": {
                            "general.architecture": "llama",
                            "llama.context_length": context_length,
                        },
                        "capabilities": ["completion"],
                    },
                )
            elif self.path == "/api/chat":
                if body["model"] not in pulled:
                    self._send(404, {"error": f'model "{body["model"]}" not found, try pulling it first'})
                    return
                if isinstance(body.get("format"), dict) and _version(version) < (0, 5, 0):
                    self._send(400, {"error": OLD_OLLAMA_FORMAT_ERROR})
                    return
                self._send(
                    200,
                    {
                        "model": body["model"],
                        "created_at": "2024-03-05T10:00:00.000000Z",
                        "message": {"role": "assistant", "content": self._answer(body)},
                        "done_reason": "stop",
                        "done": True,
                        "prompt_eval_count": 100,
                        "eval_count": 20,
                    },
                )
            elif self.path == "/v1/chat/completions":
                if body["model"] not in pulled:
                    self._send(404, {"error": {"message": f"model '{body['model']}' not found"}})
                    return
                self._send(
                    200,
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": self._answer(body)},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    },
                )
            else:
                self._send(404, {"error": "not found"})

    with _serving(Handler) as url:
        yield url, requests


def chat_by_signature(responder):
    """A `chat(messages)` for `ollama_server` that answers like `dspy_memory.testing` LMs do."""
    from dspy_memory.testing import call_for, format_answer

    def chat(messages):
        call = call_for(messages)
        answer = responder(call)
        return answer if isinstance(answer, str) else format_answer(call, answer)

    return chat
