"""Encryption at rest (docs/governance.md, "Encryption at rest"): with a key nothing readable
reaches the file or its WAL, and every way of getting the key or the driver wrong is one clear
error. The store, purge and scope tests also run on an encrypted file (tests/conftest.py,
backend "sqlcipher")."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading

import pytest

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
pytestmark = pytest.mark.cipher_process  # runs in the sqlcipher3 process (tests/conftest.py)

from dspy_memory import Memory, MemoryConfig  # noqa: E402
from dspy_memory.embed import HashEmbedder  # noqa: E402
from dspy_memory.errors import EncryptionKeyError, EncryptionUnavailableError  # noqa: E402
from dspy_memory.store.sqlite import cipher, connection  # noqa: E402
from dspy_memory.store.sqlite.cipher import KEY_ENV, export_database, raw_key  # noqa: E402

from .leakscan import decrypted, file_bytes, fragments, markers  # noqa: E402

KEY = "tests: a passphrase nobody uses"
HEADER = b"SQLite format 3\x00"


@pytest.fixture(autouse=True)
def _no_key_from_outside(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)


def open_memory(path, **settings):
    return Memory(str(path), embedder=HashEmbedder(64), **settings)


def fill(memory, words, *, per_add=100):
    for start in range(0, len(words), per_add):
        batch = words[start : start + per_add]
        memory.add(
            [{"role": "user", "content": f"My locker code word is {word}."} for word in batch],
            user_id="ada-private",
            infer=False,
        )


def planted(data: bytes, words: list[str]) -> set[str]:
    """Which of `words` (markers: whole, head or tail) occur in `data`."""
    wanted = {fragment: word for word in words for fragment in fragments(word)}
    lowered = data.lower()
    found = {
        wanted[hit.decode()]
        for hit in re.findall(rb"zq[a-z]{4}|[a-z]{7}7", lowered)
        if hit.decode() in wanted
    }
    found |= {word for word in ("locker", "ada-private") if word.encode() in lowered}
    return found


@pytest.mark.parametrize("encrypted", [True, False], ids=["with-key", "plain-control"])
def test_after_1000_memories_no_marker_is_in_the_file_or_the_wal(tmp_path, encrypted):
    """The plain control runs the same scan on a plaintext file and finds the markers: the scan
    works; and the encrypted file's bytes, decrypted with its key, hold them: so finding none in
    those bytes as stored means something."""
    words = markers(1000, seed=18)
    path = tmp_path / "memory.db"
    with open_memory(path, **({"encryption_key": KEY} if encrypted else {})) as memory:
        fill(memory, words)
        assert len(memory.get_all(user_id="ada-private", limit=2000)) == 1000
        assert memory.search(words[7], user_id="ada-private")[0].content.endswith(f"{words[7]}.")
        parts = file_bytes(str(path))  # no key in the environment: the bytes as on disk
        assert set(parts) == {"file", "wal"} and len(parts["wal"]) > 0
        found = {part: planted(data, words) for part, data in parts.items()}
    if encrypted:
        assert found == {"file": set(), "wal": set()}
        assert parts["file"][:16] != HEADER
        # The same bytes read through the key: the markers are there, encrypted, not missing.
        opened = {part: planted(data, words) for part, data in decrypted(parts, raw_key(KEY)).items()}
        assert len(opened["file"] | opened["wal"]) > 900, {part: len(found) for part, found in opened.items()}
    else:
        assert len(found["file"] | found["wal"]) > 900


def test_a_wrong_key_is_one_clear_error_and_the_file_is_unchanged(tmp_path):
    path = tmp_path / "memory.db"
    with open_memory(path, encryption_key=KEY) as memory:
        memory.add("Ada's locker code is 4711.", user_id="ada")
    before = path.read_bytes()
    with pytest.raises(EncryptionKeyError, match="wrong key or not an encrypted file"):
        open_memory(path, encryption_key=KEY + "!")
    assert path.read_bytes() == before
    with open_memory(path, encryption_key=KEY) as memory:
        assert memory.search("locker code", user_id="ada")


def test_an_encrypted_file_opened_without_a_key_says_so(tmp_path):
    path = tmp_path / "memory.db"
    open_memory(path, encryption_key=KEY).close()
    with pytest.raises(EncryptionKeyError, match=f"looks encrypted.*encryption_key=.*{KEY_ENV}"):
        open_memory(path)


def test_the_environment_variable_is_the_key_when_none_is_given(tmp_path, monkeypatch):
    path = tmp_path / "memory.db"
    monkeypatch.setenv(KEY_ENV, KEY)
    with open_memory(path) as memory:
        memory.add("Ada's locker code is 4711.", user_id="ada")
        assert memory.store.backend.encrypted
    assert path.read_bytes()[:16] != HEADER
    monkeypatch.delenv(KEY_ENV)
    with open_memory(path, encryption_key=KEY) as memory:  # the same key, given directly
        assert memory.search("locker code", user_id="ada")
    # MemoryConfig.from_env reads it as a setting too.
    monkeypatch.setenv(KEY_ENV, KEY)
    assert MemoryConfig.from_env().encryption_key.get_secret_value() == KEY


@pytest.mark.parametrize("driver", ["sqlean", "sqlite3"])
def test_a_driver_that_cannot_encrypt_is_refused_before_anything_is_written(tmp_path, monkeypatch, driver):
    """sqlean accepts `PRAGMA key` and writes plaintext: it must never be used with a key."""
    monkeypatch.setenv(connection.DRIVER_ENV, driver)
    path = tmp_path / "memory.db"
    with pytest.raises(EncryptionUnavailableError, match=f"{driver}: .*dspy-memory\\[encryption\\]"):
        open_memory(path, encryption_key=KEY)
    assert not path.exists()


def test_without_sqlcipher3_installed_a_key_is_refused(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlcipher3", None)  # import fails
    monkeypatch.setattr(connection, "_driver_cache", {})
    monkeypatch.setattr(connection, "_process_library", None)  # as in a process that opened nothing yet
    path = tmp_path / "memory.db"
    with pytest.raises(EncryptionUnavailableError, match="sqlcipher3: not installed.*pip install"):
        open_memory(path, encryption_key=KEY)
    assert not path.exists()


def test_a_key_for_a_plaintext_file_is_refused(tmp_path):
    path = tmp_path / "memory.db"
    with open_memory(path) as memory:
        memory.add("plain note", user_id="ada")
    before = path.read_bytes()
    with pytest.raises(EncryptionKeyError, match="is not encrypted, but an encryption key was given"):
        open_memory(path, encryption_key=KEY)
    assert path.read_bytes() == before


def test_a_key_for_a_postgresql_store_says_it_is_the_servers_job():
    with pytest.raises(EncryptionUnavailableError, match="server's job"):
        open_memory("postgresql://nobody@localhost:1/none", encryption_key=KEY)


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_damaged_or_foreign_file_with_a_key_is_a_clear_error(tmp_path, damage):
    path = tmp_path / "memory.db"
    if damage == "truncated":
        with open_memory(path, encryption_key=KEY) as memory:
            memory.add("note", user_id="ada")
        path.write_bytes(path.read_bytes()[:100])
        for extra in ("-wal", "-shm"):
            (tmp_path / f"memory.db{extra}").unlink(missing_ok=True)
    else:
        path.write_bytes(os.urandom(8192))
    with pytest.raises(EncryptionKeyError, match="wrong key or not an encrypted file"):
        open_memory(path, encryption_key=KEY)


def test_the_key_is_in_no_repr_dump_or_log(tmp_path, caplog):
    config = MemoryConfig(path=str(tmp_path / "memory.db"), encryption_key=KEY)
    shown = [repr(config), str(config), config.model_dump_json(), repr(config.model_dump())]
    with caplog.at_level(logging.DEBUG):
        with Memory(config, embedder=HashEmbedder(64)) as memory:
            memory.add("note", user_id="ada")
            shown += [repr(memory), repr(memory.config), repr(memory.store.backend)]
    shown.append(caplog.text)
    for text in shown:
        assert KEY not in text and raw_key(KEY) not in text


def test_the_passphrase_is_derived_once_per_process_and_every_thread_is_keyed(tmp_path):
    cipher._derive.cache_clear()
    path = tmp_path / "memory.db"
    with open_memory(path, encryption_key=KEY) as memory:
        memory.add("Ada's locker code is 4711.", user_id="ada")
        results = []

        def read():  # each thread opens its own keyed connection
            results.append(len(memory.search("locker code", user_id="ada")))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == [1, 1, 1, 1]
    open_memory(path, encryption_key=KEY).close()
    assert cipher._derive.cache_info().misses == 1


def test_raw_keys_are_64_hex_digits_and_hostile_keys_never_reach_sql():
    assert re.fullmatch(r"[0-9a-f]{64}", raw_key(KEY))
    assert raw_key(KEY) == raw_key(KEY) != raw_key(KEY + " ")
    for bad in ("", None, 42):
        with pytest.raises(EncryptionKeyError):
            raw_key(bad)
    with pytest.raises(EncryptionKeyError):
        cipher.key_statement("00'; ATTACH DATABASE 'x' AS y; --")
    # A passphrase with quotes is only ever hashed.
    assert re.fullmatch(r"[0-9a-f]{64}", raw_key("\"x'00'\"; DROP TABLE memories"))


def test_export_database_writes_plaintext_and_rekeyed_copies(tmp_path):
    path, plain, rekeyed = (str(tmp_path / name) for name in ("memory.db", "plain.db", "rekeyed.db"))
    with open_memory(path, encryption_key=KEY) as memory:
        memory.add("Ada's locker code is 4711.", user_id="ada")
        with memory.store._conns.read() as conn:
            export_database(conn, plain, None)
        with pytest.raises(FileExistsError):
            with memory.store._conns.read() as conn:
                export_database(conn, plain, None)
    assert open(plain, "rb").read(16) == HEADER
    export_database(plain, rekeyed, raw_key("another passphrase"))
    with open_memory(rekeyed, encryption_key="another passphrase") as memory:
        assert memory.search("locker code", user_id="ada")[0].content == "Ada's locker code is 4711."
    with pytest.raises(EncryptionKeyError, match="looks encrypted"):
        export_database(rekeyed, str(tmp_path / "x.db"), None)
    # A connection that is not SQLCipher's cannot export, and leaves no file behind (sqlean's,
    # without sqlite-vec: this process's SQLite library is sqlcipher3).
    sqlean = pytest.importorskip("sqlean")
    conn = sqlean.connect(plain)
    try:
        with pytest.raises(EncryptionUnavailableError):
            export_database(conn, str(tmp_path / "y.db"), raw_key(KEY))
    finally:
        conn.close()
    assert not (tmp_path / "y.db").exists()


def test_doctor_reports_the_encryption_driver_and_an_encrypted_db_without_a_key(tmp_path, monkeypatch):
    from dspy_memory.doctor_store import check_encryption

    ok = check_encryption(None)
    assert ok.status == "ok" and "SQLCipher 4." in ok.detail
    path = tmp_path / "memory.db"
    open_memory(path, encryption_key=KEY).close()
    missing = check_encryption(str(path))
    assert missing.status == "fail" and KEY_ENV in missing.fix
    monkeypatch.setenv(KEY_ENV, KEY)
    assert check_encryption(str(path)).status == "ok"
    monkeypatch.setitem(sys.modules, "sqlcipher3", None)
    monkeypatch.setattr(connection, "_driver_cache", {})
    monkeypatch.setattr(connection, "_process_library", None)  # as in a process that opened nothing yet
    assert check_encryption(None).status == "fail"  # a key is set, nothing can use it
    monkeypatch.delenv(KEY_ENV)
    skipped = check_encryption(None)
    assert skipped.status == "skip" and "dspy-memory[encryption]" in skipped.fix


def test_an_import_into_an_encrypted_store_computes_vectors_without_a_plaintext_temporary_file(
    tmp_path, monkeypatch
):
    from dspy_memory.governance import exchange_import

    source = tmp_path / "plain.db"
    with open_memory(source) as memory:
        memory.add(["Ada keeps bees on the roof.", "Ada's code is 4711."], user_id="ada", infer=False)
        memory.export(tmp_path / "ada.jsonl", user_id="ada")  # no vectors in the file

    def no_spill(*args, **kwargs):
        raise AssertionError("vectors of an encrypted store were spilled to a temporary file")

    monkeypatch.setattr(exchange_import, "_embed_ahead", no_spill)
    with open_memory(tmp_path / "secret.db", encryption_key=KEY) as memory:
        report = memory.import_(tmp_path / "ada.jsonl")
        assert report.reembedded == 2
        assert (
            memory.search("bees", user_id="ada", k=1, recipe="dense")[0].content
            == "Ada keeps bees on the roof."
        )
