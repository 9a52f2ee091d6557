"""The README's Python blocks on an encrypted file run, as a user would paste them. sqlite-vec
lives in one SQLite library per process, so they run in the sqlcipher3 process
(tests/test_cipher_process.py); the other blocks run in tests/test_readme.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from .leakscan import file_bytes

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
pytestmark = pytest.mark.cipher_process  # runs in the sqlcipher3 process (tests/conftest.py)


def test_the_encrypted_file_snippets_run_and_leave_no_plaintext(tmp_path, monkeypatch, minilm):
    from tests.test_readme import python_blocks

    blocks = python_blocks(encrypted=True)
    assert blocks, "the README shows encryption"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_KEY", "a README passphrase")
    for run in ("first", "second"):  # re-running the snippets on the same files must work too
        for index, block in enumerate(blocks):
            try:
                exec(compile(block, f"README.md encrypted block {index + 1}", "exec"), {})
            except Exception as exc:  # pragma: no cover - the message names the block
                raise AssertionError(
                    f"README encrypted block {index + 1} failed on the {run} run: {exc!r}"
                ) from exc
    written = [str(path) for path in tmp_path.iterdir() if path.suffix == ".db"]
    assert sorted(Path(path).name for path in written) == ["private-backup.db", "private.db"]
    for path in written:
        assert Path(path).read_bytes()[:16] != b"SQLite format 3\x00", path
        assert b"X1234567" not in b"".join(file_bytes(path).values()), path  # as stored
        # and read through the key, it is there: the scan above could have seen it
        assert b"X1234567" in b"".join(file_bytes(path, "a README passphrase").values()), path
