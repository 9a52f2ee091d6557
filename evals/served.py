"""A `dspy-memory serve` process for benchmarks: two tenants' keys in a fresh file, the server
in a process of its own on a free 127.0.0.1 port, stopped (and killed if it must be) at the end.
And the ceiling the server's embedder sets: its own texts/s, measured in a process like the
server's (`python evals/served.py ceiling`, reading texts on stdin)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
TENANTS = {"tenant-a": "Quillwort", "tenant-b": "Brambleton"}  # user_id: marker word


def other(tenant: str) -> str:
    return next(name for name in TENANTS if name != tenant)


# -- the server: keys, serve, ready, stop ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "dspy_memory.cli", *arguments]


def server_env(code: Path = ROOT) -> dict[str, str]:
    """The server's environment: this one without DSPY_MEMORY_* (no LM, no path), running the
    dspy_memory of `code` (a checkout; run from there too, as `python -m` puts the working
    directory first on the path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSPY_MEMORY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])
    return env


def code_in_use(code: Path = ROOT) -> str:
    """Where the server's dspy_memory comes from (to check a run served the code it meant to)."""
    command = [sys.executable, "-c", "import dspy_memory; print(dspy_memory.__file__)"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=code, env=server_env(code), check=True)
    return done.stdout.strip()


def create_keys(db: Path, embedder: str, code: Path = ROOT) -> dict[str, str]:
    """One API key per tenant (`dspy-memory keys create` prints it on stdout)."""
    keys = {}
    for tenant in TENANTS:
        done = subprocess.run(
            cli("keys", "create", "--db", str(db), "--embedder", embedder, "--user-id", tenant),
            capture_output=True, text=True, cwd=code, env=server_env(code), timeout=120, check=True,
        )  # fmt: skip
        keys[tenant] = done.stdout.strip().splitlines()[-1]
    return keys


def stop(process: subprocess.Popen, timeout: float = 15.0) -> int:
    """SIGTERM (uvicorn shuts down and the file is closed), SIGKILL after `timeout`."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@contextlib.contextmanager
def serving(work: Path, args: argparse.Namespace) -> Iterator[tuple[str, subprocess.Popen]]:
    """`dspy-memory serve` (of the checkout `args.code`) on a free loopback port until /readyz
    answers; stopped on the way out, whatever happens (an exception, Ctrl-C)."""
    port = free_port()
    command = cli("serve", "--db", str(work / "bench.db"), "--embedder", args.embedder)
    command += ["--host", "127.0.0.1", "--port", str(port), "--rate", "0"]
    with open(work / "server.log", "wb") as log:
        process = subprocess.Popen(
            command, cwd=args.code, env=server_env(args.code), stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.start_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited ({process.returncode}): {tail(work / 'server.log')}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server was not ready after {args.start_timeout} s")
            time.sleep(0.1)
        yield url, process
    finally:
        stop(process)


def tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def machine_busy_seconds() -> float | None:
    """CPU seconds all CPUs of the machine spent busy so far, every process's (Linux /proc)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# -- the embedder's ceiling --------------------------------------------------------------------------


def embed_ceiling(
    embedder: str, texts: list[tuple[str, str]], batch: int, seconds: float, code: Path = ROOT
) -> dict:
    """What the server's embedder does on its own: texts/s embedding `texts` ((kind, text)
    pairs, kind "query" or "document") `batch` at a time for `seconds`, in a process of its own
    started like the server (same environment, so the same BLAS threads; the same checkout),
    the model built as the server builds it, without its cache (the clients' texts are all new)
    or micro-batcher."""
    command = [sys.executable, str(Path(__file__).resolve()), "ceiling", "--embedder", embedder]
    command += ["--batch", str(batch), "--seconds", str(seconds)]
    done = subprocess.run(
        command, input=json.dumps(texts), capture_output=True, text=True, cwd=code, env=server_env(code),
        timeout=seconds + 300, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure_ceiling(argv: list[str]) -> dict:
    from dspy_memory.config import MemoryConfig
    from dspy_memory.embed import make_embedder

    parser = argparse.ArgumentParser(prog="python -m evals.served ceiling")
    parser.add_argument("--embedder", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    pairs = json.loads(sys.stdin.read())
    config = MemoryConfig(path="ceiling.db", embedder=args.embedder)  # defaults, as `serve` has
    built = make_embedder(
        args.embedder, batch_size=config.embed_batch_size, cache_size=0, local_backend=config.local_backend
    )
    model = getattr(built, "inner", built)  # the model itself, not a batcher in front of it
    as_query = getattr(model, "query_text", lambda text: text)
    texts = [as_query(text) if kind == "query" else text for kind, text in pairs]
    model.embed(texts[: args.batch])  # loads the model
    embedded, batches, start, cpu = 0, 0, time.perf_counter(), time.process_time()
    while batches < 3 or time.perf_counter() - start < args.seconds:
        chunk = [texts[(embedded + i) % len(texts)] for i in range(args.batch)]
        model.embed(chunk)
        embedded, batches = embedded + len(chunk), batches + 1
    wall = time.perf_counter() - start
    return {
        "batch": args.batch,
        "texts": embedded,
        "seconds": wall,
        "texts_per_s": embedded / wall,
        "ms_per_batch": wall / batches * 1000,
        "cpu_cores": (time.process_time() - cpu) / wall,
    }


if __name__ == "__main__":
    if sys.argv[1:2] != ["ceiling"]:
        sys.exit("usage: python evals/served.py ceiling --embedder SPEC --batch N --seconds S < texts.json")
    print(json.dumps(_measure_ceiling(sys.argv[2:])))
