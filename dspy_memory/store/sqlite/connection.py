"""SQLite driver selection and connections.

The stdlib `sqlite3` of many Pythons (this project's CI machines, macOS system Python) cannot
load extensions, so sqlite-vec cannot be used through it. We try drivers in order of preference
and keep the first that loads sqlite-vec and has FTS5.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any
from urllib.parse import quote

from dspy_memory.errors import (
    ExtensionLoadError,
    MemoryClosedError,
    ReadOnlyError,
)
from dspy_memory.store.faults import sqlite_storage_error as storage_error
from dspy_memory.store.sqlite.batch_insert import insert_rows
from dspy_memory.store.sqlite.cipher import apply_key, cipher_version, no_cipher_error

# sqlean.py first: a recent SQLite with extension loading on Linux, macOS and Windows.
DRIVER_MODULES = ("sqlean", "pysqlite3.dbapi2", "sqlite3")
# With an encryption key: SQLCipher's driver (the `encryption` extra).
CIPHER_DRIVER_MODULES = ("sqlcipher3",)
DRIVER_ENV = "DSPY_MEMORY_SQLITE_DRIVER"

_driver_lock = threading.Lock()
_driver_cache: dict[tuple[tuple[str, ...], bool], ModuleType] = {}


# sqlite-vec keeps the SQLite API it was loaded with in a global, and SQLite loads extensions
# RTLD_GLOBAL: loaded into a second SQLite library in one process (sqlean for plain files,
# sqlcipher3 for encrypted ones), it drives the first library's connections through the second
# one's API and crashes the process (tests/test_sqlite_library.py: a segfault at the next vector
# search). So the first library a process resolves is the only one it uses; a forked child
# starts afresh (SQLite connections must not cross a fork anyway).
_process_library: tuple[int, ModuleType] | None = None


def _library_in_use() -> ModuleType | None:
    if _process_library is not None and _process_library[0] == os.getpid():
        return _process_library[1]
    return None


def _second_library_error(in_use: ModuleType, wanted: str, why: str) -> ExtensionLoadError:
    return ExtensionLoadError(
        f"this process already uses sqlite-vec through {in_use.__name__}'s SQLite, and {why} asks "
        f"for {wanted}: sqlite-vec cannot be loaded into a second SQLite library in one process (it "
        f"would crash). To open plain and encrypted files in one process, set "
        f"{DRIVER_ENV}=sqlcipher3 before opening any (SQLCipher opens plain files too; their "
        "erasure then compacts with a full VACUUM), or use one process per kind of file."
    )


def load_sqlite_vec(conn: Any) -> None:
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def _probe(module_name: str, *, cipher: bool = False, load_vec: bool = True) -> tuple[ModuleType | None, str]:
    """Return (module, "") if the driver is usable, else (None, why not). load_vec=False checks
    all but sqlite-vec (not to be loaded into a second library of the process)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None, "not installed"
    try:
        conn = module.connect(":memory:")
    except Exception as exc:  # pragma: no cover - broken installs only
        return None, f"cannot open a database ({exc})"
    try:
        if not hasattr(conn, "enable_load_extension"):
            return None, "this build cannot load extensions"
        # Before sqlite-vec is loaded: a driver that cannot encrypt must not load it at all.
        if cipher and cipher_version(conn) is None:
            return None, "this SQLite cannot encrypt (no SQLCipher)"
        try:
            if load_vec:
                load_sqlite_vec(conn)
                conn.execute("SELECT vec_version()")
        except Exception as exc:
            return None, f"could not load sqlite-vec ({exc})"
        try:
            conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        except Exception:
            return None, "this SQLite has no FTS5"
        return module, ""
    finally:
        conn.close()


def resolve_driver(preferred: str | None = None, *, encrypted: bool = False) -> ModuleType:
    """Pick the DB-API module to use, or raise an error that says what to install.
    `encrypted`: the driver must be SQLCipher's (a plain SQLite would accept `PRAGMA key` and
    write plaintext)."""
    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        raise ExtensionLoadError(
            "sqlite-vec is not installed; install it with: pip install sqlite-vec"
        ) from None
    global _process_library
    preferred = preferred or os.environ.get(DRIVER_ENV) or None
    order = (preferred,) if preferred else CIPHER_DRIVER_MODULES if encrypted else DRIVER_MODULES
    with _driver_lock:
        in_use = _library_in_use()
        if in_use is not None and (preferred is None or in_use.__name__ == preferred):
            if not encrypted or in_use.__name__ in CIPHER_DRIVER_MODULES:
                return in_use  # plain files open through SQLCipher too
        cached = _driver_cache.get((order, encrypted))
        if cached is not None and in_use is None:
            _process_library = (os.getpid(), cached)
            return cached
        reasons = []
        for name in order:
            if in_use is not None and name != in_use.__name__:
                # Probing loads sqlite-vec: tell why not instead, unless the driver is unfit anyway.
                module, why = _probe(name, cipher=encrypted, load_vec=False)
                if module is not None:
                    raise _second_library_error(
                        in_use, name, "an encrypted file" if encrypted else f"{DRIVER_ENV}"
                    )
                reasons.append(f"{name}: {why}")
                continue
            module, why = _probe(name, cipher=encrypted)
            if module is not None:
                _driver_cache[order, encrypted] = module
                _process_library = (os.getpid(), module)
                return module
            reasons.append(f"{name}: {why}")
    tried = "; ".join(reasons)
    if encrypted:
        raise no_cipher_error(tried)
    raise ExtensionLoadError(
        "sqlite-vec could not be loaded: no available SQLite driver can load extensions "
        f"with FTS5 (tried {tried}). This Python's sqlite3 cannot load extensions; install "
        "the sqlean.py package (pip install sqlean.py), or pysqlite3-binary on Linux."
    )


def cipher_driver() -> tuple[ModuleType | None, str]:
    """SQLCipher's driver if it could open encrypted files here, else (None, why not). Unlike
    `resolve_driver(encrypted=True)` it never fails for the process's library: when another one
    already holds sqlite-vec, it checks SQLCipher without loading sqlite-vec into it (doctor)."""
    with _driver_lock:
        in_use = _library_in_use()
    name = CIPHER_DRIVER_MODULES[0]
    if in_use is not None and in_use.__name__ == name:
        return in_use, ""
    return _probe(name, cipher=True, load_vec=in_use is None)


PAGE_SIZE = 8192


def open_connection(
    path: str, driver: ModuleType, *, busy_timeout_ms: int, key: str | None = None, read_only: bool = False
) -> Any:
    """A configured connection; `key` (a raw key, cipher.raw_key) keys it first. `read_only`:
    opened with mode=ro, so SQLite itself refuses every write."""
    target = f"file:{quote(os.path.abspath(path))}?mode=ro" if read_only else path
    conn = driver.connect(
        target,
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,  # autocommit: transactions are explicit (see Connections)
        check_same_thread=False,
        uri=target.startswith("file:"),
    )
    # Rows read by column name (row["content"]); they index and unpack like tuples too.
    conn.row_factory = driver.Row
    if key is not None:
        apply_key(conn, key, path)
    load_sqlite_vec(conn)
    if key is None and not read_only:
        # 8 kB pages for a new file (an existing file keeps its page size): a memory's float32
        # vector row (~1.6 kB) packs 5 to a page instead of 2 to a 4 kB page, which left a
        # fifth of the file empty (docs/benchmarks.md, "Disk per memory"). SQLCipher's page
        # size is its own setting, left at its default.
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if path != ":memory:" and not read_only:
        conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL is durable in WAL mode except for the last commits on power loss; it avoids an
    # fsync per transaction.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted cells and freed pages are zeroed in every write, not only during an erasure, so
    # rewrites of a row leave no old copies behind (what page splits leave is zeroed after an
    # erasure: store/sqlite/freespace.py). No cost measurable here: docs/architecture.md, "Erasure".
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -32768")
    return conn


class Connections:
    """One connection per thread for files (concurrent readers under WAL), one shared for
    ":memory:"; writes are serialized in-process by a lock and across processes by
    BEGIN IMMEDIATE plus the busy timeout."""

    def __init__(
        self,
        path: str,
        driver: ModuleType,
        *,
        busy_timeout_ms: int,
        key: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self.driver = driver
        self._busy_timeout_ms = busy_timeout_ms
        self._opening: dict[str, Any] = dict(busy_timeout_ms=busy_timeout_ms, key=key, read_only=read_only)
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._all: list[Any] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._shared = None
        if path == ":memory:":
            self._shared = open_connection(path, driver, **self._opening)
            self._all.append(self._shared)

    def _conn(self) -> Any:
        self.check_open()
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_connection(self.path, self.driver, **self._opening)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def faults(self) -> Iterator[None]:
        """The driver's storage faults (a full disk, an I/O error, a damaged or read-only file)
        as StorageErrors naming the file; every statement runs inside one of these."""
        try:
            yield
        except self.driver.Error as exc:
            error = storage_error(self.path, exc)
            if error is None:
                raise
            raise error from exc

    @contextmanager
    def read(self) -> Iterator[Any]:
        """A connection for reads. Use `snapshot()` when several statements must agree."""
        with self.faults():
            if self._shared is not None:
                with self._write_lock:
                    yield self._shared
            else:
                yield self._conn()

    @contextmanager
    def snapshot(self) -> Iterator[Any]:
        """A read transaction: every statement inside sees the same committed state."""
        with self.read() as conn:
            if conn.in_transaction:
                yield conn
                return
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A write transaction. Nested calls on the same thread join the outer transaction."""
        if self.read_only:
            raise ReadOnlyError.for_path(repr(self.path))
        with self._write_lock, self.faults():
            conn = self._conn()
            if getattr(self._local, "depth", 0):
                yield from self._joined(conn)
                return
            conn.execute("BEGIN IMMEDIATE")
            yield from self._outermost(conn)

    @contextmanager
    def transaction_if_free(self) -> Iterator[Any | None]:
        """A write transaction if the file can be locked at once, else None: for bookkeeping
        that may wait for a later write but must never make a read wait or fail."""
        if self.read_only:
            raise ReadOnlyError.for_path(repr(self.path))
        if not self._write_lock.acquire(blocking=False):
            yield None
            return
        try:
            with self.faults():
                yield from self._if_free()
        finally:
            self._write_lock.release()

    def _if_free(self) -> Iterator[Any | None]:
        conn = self._conn()
        if getattr(self._local, "depth", 0):
            yield from self._joined(conn)
            return
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
            began = True
        except self.driver.OperationalError:  # another process holds the write lock
            began = False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        if not began:
            yield None
            return
        yield from self._outermost(conn)

    def _joined(self, conn: Any) -> Iterator[Any]:
        depth = self._local.depth
        self._local.depth = depth + 1
        try:
            yield conn
        finally:
            self._local.depth = depth

    def _outermost(self, conn: Any) -> Iterator[Any]:
        self._local.depth = 1
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            # SQLite has already rolled back after some errors (SQLITE_FULL, SQLITE_IOERR); a
            # failed COMMIT leaves the transaction open. Either way nothing of it stays.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            self._local.depth = 0

    insert_rows = staticmethod(insert_rows)  # store/backend.py, Connections.insert_rows

    def in_transaction(self) -> bool:
        """Whether this thread is inside `transaction()`."""
        return bool(getattr(self._local, "depth", 0))

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise MemoryClosedError.for_path(self.path)

    def close(self) -> None:
        with self._all_lock:
            if self._closed:
                return
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # pragma: no cover - closing a connection of a dead thread
                pass
