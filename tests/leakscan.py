"""Looking for erased content in a memory file: in every table (the shadow tables of the vector
and keyword indexes included) and in the raw bytes of the file and its WAL, where freed pages,
old cells and index entries would keep it."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dspy_memory.store.sqlite.cipher import raw_key

from .encrypted import connect, decrypted_file, decrypted_wal, key_in_use

MARK = "zq"
_LETTERS = "bcdfghjklmnpqrstvwxz"


def markers(count: int, *, seed: int) -> list[str]:
    """`count` distinct words that occur nowhere else, for planting in content.

    FTS5 stores a term in an index segment as the part it does not share with the term before
    it, so a scan for the whole word could miss it there. Each marker has a unique head (its
    first 6 characters), so it shares at most 5 characters with any other term and its tail
    `marker[5:]` is always stored whole. The final digit keeps the porter stemmer off it.
    """
    rng = random.Random(seed)
    heads = rng.sample(list(itertools.product(_LETTERS, repeat=4)), count)
    return [MARK + "".join(head) + "".join(rng.choices(_LETTERS, k=6)) + "7" for head in heads]


def fragments(word: str) -> set[str]:
    """What to look for: the word, and for a marker also its head and tail (see `markers`)."""
    word = word.lower()
    if word.startswith(MARK) and len(word) >= 12:
        return {word, word[:6], word[5:]}
    return {word}


def file_bytes(path: str, passphrase: str | None = None) -> dict[str, bytes]:
    """The database file and its WAL (when there is one), as stored on disk; an encrypted file
    (a key in use: tests/encrypted.py, or `passphrase`) with every page decrypted, freed ones and
    old WAL frames included: its bytes on disk would prove nothing."""
    parts = {"file": Path(path).read_bytes()}
    wal = Path(path + "-wal")
    if wal.exists():
        parts["wal"] = wal.read_bytes()
    key = raw_key(passphrase) if passphrase else key_in_use()
    return parts if key is None else decrypted(parts, key)


def decrypted(parts: dict[str, bytes], key: str) -> dict[str, bytes]:
    """`file_bytes`' parts of an encrypted file, read as on disk, decrypted with `key` (raw, hex)."""
    raw = bytes.fromhex(key)
    return {
        part: (decrypted_file if part == "file" else decrypted_wal)(data, raw) for part, data in parts.items()
    }


def table_values(path: str) -> Iterator[tuple[str, object]]:
    """Every (table, value) in the file, shadow tables included. Virtual tables that need an
    extension to be read are skipped: their shadow tables hold the data."""
    conn = connect(path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for name in names:
            try:
                rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
            except Exception as exc:  # sqlean's or sqlcipher3's OperationalError
                if "no such module" not in str(exc):
                    raise
                continue
            for row in rows:
                for value in row:
                    yield name, value
    finally:
        conn.close()


_HEAD = re.compile(rb"zq[bcdfghjklmnpqrstvwxz]{4}")
_TAIL = re.compile(rb"[bcdfghjklmnpqrstvwxz]{7}7")


def _scan(
    data: bytes, needles: dict[str, str], others: list[str], blobs: list[bytes], keys: dict[bytes, Any]
) -> set[str]:
    """Which words (marker fragments in `needles`, plain words in `others`) and blobs occur in
    `data`. Markers are found by their shape first, then looked up: one pass per pattern
    instead of one per marker."""
    lowered = data.lower()
    hits = {match.decode() for match in _HEAD.findall(lowered)} | {
        match.decode() for match in _TAIL.findall(lowered)
    }
    found = {needles[hit] for hit in hits if hit in needles}
    found |= {word for word in others if word.encode() in lowered}
    found |= {f"vector {i}" for i in _blob_hits(data, blobs, keys)}
    return found


def _blob_keys(blobs: list[bytes]) -> dict[bytes, list[tuple[int, int]]]:
    """Each blob keyed by 8 of its bytes, chosen varied (never a run of zeros, which zeroed
    pages are full of): {key: [(blob index, offset of the key in the blob)]}."""
    keys: dict[bytes, list[tuple[int, int]]] = {}
    for index, blob in enumerate(blobs):
        offset = max(range(0, len(blob) - 7, 4), key=lambda k: len(set(blob[k : k + 8])))
        keys.setdefault(blob[offset : offset + 8], []).append((index, offset))
    return keys


def _blob_hits(data: bytes, blobs: list[bytes], keys: dict[bytes, list[tuple[int, int]]]) -> set[int]:
    """Indexes of `blobs` found in `data`: one numpy pass per byte alignment finds where a key
    occurs, instead of one search per blob; candidates are then compared whole."""
    if not keys or len(data) < 8:
        return set()
    wanted = np.frombuffer(b"".join(keys), dtype="<u8")
    hits = set()
    for shift in range(8):
        words = np.frombuffer(data, dtype="<u8", count=(len(data) - shift) // 8, offset=shift)
        for position in (shift + 8 * np.flatnonzero(np.isin(words, wanted))).tolist():
            for index, offset in keys[data[position : position + 8]]:
                start = position - offset
                if start >= 0 and data[start : start + len(blobs[index])] == blobs[index]:
                    hits.add(index)
    return hits


def postgres_values(url: str, blobs: list[bytes]) -> Iterator[tuple[str, object]]:
    """Every (table, row as text) of the store's schema, and (memory_vectors, float32 bytes) of
    every stored vector (their text form is not the bytes a test plants)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            )
        ]
        for name in names:
            for (text,) in conn.execute(f'SELECT t::text FROM "{name}" t'):
                yield name, text
        if blobs:
            for (text,) in conn.execute("SELECT embedding::text FROM memory_vectors"):
                yield "memory_vectors", np.array(json.loads(text), dtype=np.float32).tobytes()


def unseen(path: str, words: Iterable[str] = (), blobs: Iterable[bytes] = ()) -> list[str]:
    """The positive control of a leak scan, run before the erasure: which of `words` and `blobs`
    the scan does not find in the raw bytes of the file and its WAL (decrypted, for an encrypted
    file), or on PostgreSQL in the tables. Empty when it sees them all. A scan that cannot see
    the data (pages left encrypted, a part skipped) finds nothing after the erasure either."""
    words = [word.lower() for word in words]
    blobs = list(blobs)
    found = {
        hit.split(": ", 1)[1] for hit in leaks(path, words, blobs, tables=path.startswith("postgresql://"))
    }
    wanted = [*words, *(f"vector {i}" for i in range(len(blobs)))]
    return [item for item in wanted if item not in found]


def leaks(
    path: str, words: Iterable[str] = (), blobs: Iterable[bytes] = (), *, tables: bool = True
) -> list[str]:
    """Where any of `words` (case-insensitive) or `blobs` (exact bytes, e.g. float32 vectors)
    still occurs: "file: <word>", "wal: <word>" or "<table>: <word>". Empty when erased.
    On PostgreSQL (a URL): in every table of the store's schema (docs/scaling.md says what
    VACUUM leaves in the server's files). `tables=False`: the raw bytes only."""
    words = [word.lower() for word in words]
    needles = {fragment: word for word in words if word.startswith(MARK) for fragment in fragments(word)}
    others = [word for word in words if not word.startswith(MARK)]
    blobs = list(blobs)
    keys = _blob_keys(blobs)
    found: set[str] = set()
    postgres = path.startswith("postgresql://")
    # Raw bytes first: opening a connection must not be what moves the WAL into the file.
    for part, data in () if postgres else file_bytes(path).items():
        found |= {f"{part}: {hit}" for hit in _scan(data, needles, others, blobs, keys)}
    by_table: dict[str, list[bytes]] = {}
    for table, value in (postgres_values(path, blobs) if postgres else table_values(path)) if tables else ():
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, bytes):
            by_table.setdefault(table, []).append(value)
    for table, values in by_table.items():
        data = b"\x00".join(values)
        found |= {f"{table}: {hit}" for hit in _scan(data, needles, others, blobs, keys)}
    return sorted(found)


def integrity(path: str) -> list[str]:
    """PRAGMA integrity_check of the file (["ok"] when sound)."""
    conn = connect(path)
    try:
        return [row[0] for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
