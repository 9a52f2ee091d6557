"""The README's memory-service example runs as written (a `sh` block): keys, serve, and one curl
per seed endpoint, against a real server on 127.0.0.1 (only the port is changed)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def service_block() -> str:
    [block] = [
        b for b in re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S) if "dspy-memory serve" in b
    ]
    return block


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration
def test_the_readme_service_example_runs(tmp_path, minilm):
    script = service_block().replace("8080", str(free_port()))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("DSPY_MEMORY_PATH", None)
    # The server is stopped even when a step fails (the README's own last line is `kill %1`).
    guarded = "set -e\ntrap 'kill %1 2>/dev/null || true' EXIT\n" + script
    done = subprocess.run(
        ["bash", "-c", guarded], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    replies, decoder, at = [], json.JSONDecoder(), done.stdout.find("{")
    while at != -1:  # curl's replies end without a newline: read them one after another
        reply, end = decoder.raw_decode(done.stdout, at)
        replies.append(reply)
        at = done.stdout.find("{", end)
    stored, found, forgotten = replies
    assert stored["status"] == "stored"
    assert [m["content"] for m in found["memories"]][:1] == ["I moved to Denver last month."]
    assert forgotten == {"status": "deleted", "memory_id": stored["memory_id"]}
    token = (tmp_path / "ada.key").read_text().strip()
    assert token.startswith("dm_") and token.encode() not in (tmp_path / "service.db").read_bytes()
