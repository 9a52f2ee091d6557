"""Reading an encrypted memory file in tests: keyed connections, and every page of the file and
its WAL decrypted, so that leak scans (tests/leakscan.py) still see freed pages and old WAL
frames. Which key: $DSPY_MEMORY_ENCRYPTION_KEY (set by tests/conftest.py for the `sqlcipher`
backend), as the store reads it."""

from __future__ import annotations

import os
import struct
from typing import Any

from dspy_memory.store.sqlite.cipher import KEY_ENV, SQLITE_HEADER, raw_key

TEST_KEY = "correct horse battery staple (tests only)"
# SQLCipher 4's defaults: 4096-byte pages ending in a reserve of IV (16) + HMAC-SHA512 (64); the
# first 16 bytes of page 1 are the file's salt, stored in the clear. AES-256-CBC.
PAGE = 4096
RESERVE = 80
WAL_HEADER, FRAME_HEADER = 32, 24


def key_in_use() -> str | None:
    """The raw key (hex) the store would use now, or None for plaintext."""
    passphrase = os.environ.get(KEY_ENV)
    return raw_key(passphrase) if passphrase else None


def connect(path: str) -> Any:
    """A connection that reads the file as the store does: keyed SQLCipher when a key is in use,
    else sqlean."""
    key = key_in_use()
    if key is None:
        import sqlean

        return sqlean.connect(path)
    import sqlcipher3

    conn = sqlcipher3.connect(path)
    conn.execute(f"PRAGMA key = \"x'{key}'\"")
    return conn


def decrypt_page(key: bytes, page: bytes, *, first: bool) -> bytes:
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    iv = page[PAGE - RESERVE : PAGE - RESERVE + 16]
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return decryptor.update(page[16 if first else 0 : PAGE - RESERVE]) + decryptor.finalize()


def decrypted_file(data: bytes, key: bytes) -> bytes:
    """Every page of an encrypted database file, decrypted (free pages included)."""
    if data[:16] == SQLITE_HEADER:
        raise AssertionError("the file is not encrypted")
    pages = b"".join(
        decrypt_page(key, data[start : start + PAGE], first=start == 0) for start in range(0, len(data), PAGE)
    )
    # A wrong key decrypts to noise, in which a leak scan finds nothing: page 1 must read as the
    # rest of a SQLite header (bytes 16-23: page size, versions, reserve, payload fractions).
    page_size, reserve, fractions = struct.unpack(">H", pages[:2])[0], pages[4], pages[5:8]
    if (page_size, reserve, fractions) != (PAGE, RESERVE, b"\x40\x20\x20"):
        raise AssertionError(
            "page 1 does not decrypt to a SQLite header: a wrong key, or not SQLCipher 4's defaults "
            f"(page size {page_size}, reserve {reserve}, fractions {fractions.hex()})"
        )
    return pages


def decrypted_wal(data: bytes, key: bytes) -> bytes:
    """Every frame of an encrypted WAL, decrypted: old frames that a checkpoint already copied
    and later transactions overwrite are still in the file, so they are scanned too."""
    if len(data) < WAL_HEADER:
        return b""
    (page_size,) = struct.unpack(">I", data[8:12])
    assert page_size == PAGE, page_size
    pages = []
    for start in range(WAL_HEADER, len(data) - FRAME_HEADER - PAGE + 1, FRAME_HEADER + PAGE):
        (page_number,) = struct.unpack(">I", data[start : start + 4])
        page = data[start + FRAME_HEADER : start + FRAME_HEADER + PAGE]
        pages.append(decrypt_page(key, page, first=page_number == 1))
    return b"".join(pages)
