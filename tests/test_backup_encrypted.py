"""Backups, restore and key changes of encrypted files (docs/governance.md, "Backups and
restore"; the plaintext cases are in tests/test_backup.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dspy_memory import Memory
from dspy_memory.cli import main
from dspy_memory.embed import HashEmbedder
from dspy_memory.errors import BackupError, VerificationError
from dspy_memory.governance.backup import verify_file

from .leakscan import file_bytes, markers
from .test_backup import hits

pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
pytestmark = pytest.mark.cipher_process  # runs in the sqlcipher3 process (tests/conftest.py)


KEY, OTHER_KEY = "backup test passphrase", "another passphrase for rekey"


def encrypted_memory(path, words):
    memory = Memory(str(path), embedder=HashEmbedder(64), encryption_key=KEY)
    for word in words:
        memory.add(f"the vault code is {word}", user_id="ada", infer=False)
    return memory


def plaintext_leaks(path, words, passphrase=None):
    """Which of `words` the file and its WAL hold as stored, or read through `passphrase`: the
    control that an encrypted file's finding none is not a scan that could not see them."""
    data = b"".join(file_bytes(str(path), passphrase).values()).lower()
    return [word for word in words if word.encode() in data]


def test_the_backup_of_an_encrypted_file_is_encrypted_with_the_same_key(tmp_path):
    words = markers(5, seed=7)
    with encrypted_memory(tmp_path / "secret.db", words) as memory:
        manifest = memory.backup(tmp_path / "secret.bak")
        answers = hits(memory, words[2])
    assert manifest.encrypted and manifest.tables["memories"] == 5
    assert plaintext_leaks(tmp_path / "secret.bak", words) == []
    assert plaintext_leaks(tmp_path / "secret.bak", words, passphrase=KEY) == words
    assert Path(tmp_path / "secret.bak").read_bytes()[:16] != b"SQLite format 3\x00"
    assert verify_file(tmp_path / "secret.bak", encryption_key=KEY).ok
    without = verify_file(tmp_path / "secret.bak")
    assert "cannot be read as a memory file (it looks encrypted: give its key)" in without.problems[0]
    wrong = verify_file(tmp_path / "secret.bak", encryption_key=OTHER_KEY)
    assert "wrong key or not an encrypted file" in wrong.problems[0]
    # Restored with its key, it answers as the original did.
    Memory.restore_backup(tmp_path / "secret.bak", tmp_path / "restored.db", encryption_key=KEY)
    with Memory(str(tmp_path / "restored.db"), embedder=HashEmbedder(64), encryption_key=KEY) as memory:
        assert hits(memory, words[2]) == answers
    # The control: the same scan finds the words in a plaintext backup.
    with encrypted_memory(tmp_path / "secret.db", ()) as memory:
        pass
    plain = tmp_path / "plain.db"
    with Memory(str(plain), embedder=HashEmbedder(64)) as memory:
        for word in words:
            memory.add(f"the vault code is {word}", user_id="ada", infer=False)
        memory.backup(tmp_path / "plain.bak")
    assert plaintext_leaks(tmp_path / "plain.bak", words) == words


def test_encrypt_rekey_decrypt_swap_the_file_and_the_old_key_stops_working(tmp_path, monkeypatch, capsys):
    from dspy_memory.errors import EncryptionKeyError

    words = markers(4, seed=11)
    db = str(tmp_path / "a.db")
    with Memory(db, embedder=HashEmbedder(64)) as memory:
        for word in words:
            memory.add(f"the vault code is {word}", user_id="ada", infer=False)
        # Searching is a recall (it strengthens memories): compare what is found, in order.
        answers = [hit[:2] for hit in hits(memory, words[1])]
    monkeypatch.delenv("DSPY_MEMORY_ENCRYPTION_KEY", raising=False)
    monkeypatch.setenv("NEW_KEY", KEY)
    assert main(["encrypt", "--db", db, "--new-key-env", "NEW_KEY"]) == 0
    assert "encrypted: " in capsys.readouterr().out
    assert plaintext_leaks(db, words) == [] and verify_file(db, encryption_key=KEY).ok
    assert plaintext_leaks(db, words, passphrase=KEY) == words
    assert main(["encrypt", "--db", db, "--new-key-env", "NEW_KEY"]) == 2
    assert "already encrypted" in capsys.readouterr().err

    monkeypatch.setenv("DSPY_MEMORY_ENCRYPTION_KEY", KEY)
    monkeypatch.setenv("NEW_KEY", OTHER_KEY)
    assert main(["rekey", "--db", db, "--new-key-env", "NEW_KEY"]) == 0
    assert "re-keyed: " in capsys.readouterr().out
    with pytest.raises(EncryptionKeyError, match="wrong key"):
        Memory(db, embedder=HashEmbedder(64), encryption_key=KEY)
    with Memory(db, embedder=HashEmbedder(64), encryption_key=OTHER_KEY) as memory:
        assert [hit[:2] for hit in hits(memory, words[1])] == answers
        assert [entry.operation for entry in memory.audit(operation="rekey")] == ["rekey"]
        (encrypted,) = memory.audit(operation="encrypt")
        assert encrypted.details["encrypted"] is True and encrypted.counts == {"memories": 4}

    monkeypatch.setenv("OLD_KEY", OTHER_KEY)
    capsys.readouterr()
    assert main(["decrypt", "--db", db, "--key-env", "OLD_KEY", "--json"]) == 0
    decrypted = json.loads(capsys.readouterr().out)  # the whole of stdout is JSON
    assert decrypted["ok"] is True and decrypted["tables"]["memories"] == 4, decrypted
    assert Path(db).read_bytes()[:16] == b"SQLite format 3\x00"
    assert verify_file(db).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]


def test_key_changes_are_refused_safely(tmp_path, monkeypatch, capsys):
    from dspy_memory.governance.rekey import change_key

    db = tmp_path / "a.db"
    with encrypted_memory(db, ["one", "two"]) as memory:
        with pytest.raises(BackupError, match="is open in another connection or process"):
            change_key(db, old_key=KEY, new_key=OTHER_KEY)
        assert [hit.memory.content for hit in memory.search("vault", user_id="ada", k=1)]
    with pytest.raises(VerificationError, match="wrong key"):
        change_key(db, old_key=OTHER_KEY, new_key=KEY)
    monkeypatch.delenv("DSPY_MEMORY_ENCRYPTION_KEY", raising=False)
    assert main(["rekey", "--db", str(db), "--new-key-env", "UNSET_VARIABLE"]) == 2
    assert "Keys are never taken as arguments" in capsys.readouterr().err
    monkeypatch.setenv("DSPY_MEMORY_ENCRYPTION_KEY", KEY)
    assert main(["rekey", "--db", str(db), "--new-key-env", "UNSET_VARIABLE"]) == 2
    assert "names $UNSET_VARIABLE, which is not set" in capsys.readouterr().err
    assert verify_file(db, encryption_key=KEY).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]
