"""One SQLite library per process holds sqlite-vec (store/sqlite/connection.py): plain files
open with sqlean, encrypted ones with sqlcipher3, and sqlite-vec loaded into both in one process
crashed it at the next vector statement. Each case runs in a child process, so a crash fails
the test instead of killing the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")

# A plain and an encrypted store, used in turn, the way a benchmark or an app with two files
# would use them. 384 dimensions (MiniLM's): with 64 the crash did not show.
TWO_FILES = textwrap.dedent(
    """
    import sys
    from dspy_memory import Memory
    from dspy_memory.embed import HashEmbedder
    from dspy_memory.errors import ExtensionLoadError

    folder = sys.argv[1]
    stores = {}
    try:
        for name, key in (("plain", None), ("encrypted", "a passphrase")):
            stores[name] = Memory(f"{folder}/{name}.db", embedder=HashEmbedder(384), encryption_key=key)
    except ExtensionLoadError as exc:
        print("refused:", exc)
        sys.exit(3)
    for round in range(30):
        for name, memory in stores.items():
            memory.add([f"note {round} {i} about gardens in {name}" for i in range(20)], user_id="u")
            hits = memory.search("gardens", user_id="u", recipe="dense")
            assert hits and all(name in hit.content for hit in hits), (name, hits)
    print("ok", {name: len(memory.get_all(user_id="u", limit=10_000)) for name, memory in stores.items()})
    """
)


def run(tmp_path, env_driver=None):
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith("DSPY_MEMORY_")}
    if env_driver:
        env["DSPY_MEMORY_SQLITE_DRIVER"] = env_driver
    return subprocess.run(
        [sys.executable, "-c", TWO_FILES, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
    )


def test_a_second_sqlite_library_is_refused_with_a_clear_error_not_a_crash(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "refused:" in done.stdout
    assert "DSPY_MEMORY_SQLITE_DRIVER=sqlcipher3" in done.stdout  # says how to use both


def test_with_sqlcipher3_for_every_file_plain_and_encrypted_work_side_by_side(tmp_path):
    done = run(tmp_path, env_driver="sqlcipher3")
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "'plain': 600" in done.stdout and "'encrypted': 600" in done.stdout
    assert (tmp_path / "plain.db").read_bytes()[:16] == b"SQLite format 3\x00"
    assert (tmp_path / "encrypted.db").read_bytes()[:16] != b"SQLite format 3\x00"


def cli(tmp_path, *args, **env_extra):
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith("DSPY_MEMORY_")}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "dspy_memory.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_key_commands_read_the_plaintext_side_through_sqlcipher(tmp_path):
    """`encrypt` reads a plain file and writes an encrypted one in one process, `decrypt` the
    other way: both sides through sqlcipher3, or the first read picks sqlean and the second is
    refused (it was, before change_key chose the library first)."""
    made = subprocess.run(
        [sys.executable, "-c", "from dspy_memory import Memory\nfrom dspy_memory.embed import HashEmbedder\n"
         "with Memory('m.db', embedder=HashEmbedder(384)) as m:\n"
         "    m.add([f'note {i} about the garden' for i in range(40)], user_id='u')"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={key: value for key, value in __import__("os").environ.items() if not key.startswith("DSPY_MEMORY_")},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    steps = [
        (("encrypt", "--db", "m.db", "--new-key-env", "NEW_KEY"), {"NEW_KEY": "one"}),
        (("rekey", "--db", "m.db", "--new-key-env", "NEW_KEY"), {"DSPY_MEMORY_ENCRYPTION_KEY": "one", "NEW_KEY": "two"}),
        (("backup", "--db", "m.db", "m.bak"), {"DSPY_MEMORY_ENCRYPTION_KEY": "two"}),
        (("decrypt", "--db", "m.db"), {"DSPY_MEMORY_ENCRYPTION_KEY": "two"}),
        (("search", "garden", "--db", "m.db", "--user", "u"), {}),
    ]  # fmt: skip
    for args, env in steps:
        done = cli(tmp_path, *args, **env)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert "note" in done.stdout and (tmp_path / "m.db").read_bytes()[:16] == b"SQLite format 3\x00"
    assert (tmp_path / "m.bak").read_bytes()[:16] != b"SQLite format 3\x00"
