"""The house rules (docs/architecture.md) checked by tools, not by review: import-linter's
contracts in pyproject.toml, and no SQL outside dspy_memory/store/. Each check is shown to fail
on a planted violation."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dspy_memory"
# SQL as this package writes it (keywords in capitals), and the DB-API calls that run it.
SQL = re.compile(
    r"\b(SELECT\b[\s\S]+?\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|VIRTUAL|TRIGGER)|ALTER\s+TABLE|DROP\s+(TABLE|INDEX)|PRAGMA\s+\w+)\b"
)
RUNS_SQL = {"execute", "executemany", "executescript"}


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    # Run where `cwd`'s dspy_memory is the one imported (its folder comes first on sys.path).
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)


def sql_outside_store(package: Path) -> list[str]:
    """file:line of SQL text, or of a call that runs SQL, in a module outside store/."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if "store" in path.relative_to(package).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(package.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if SQL.search(node.value):
                    found.append(where)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in RUNS_SQL
            ):
                found.append(where)
    return found


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_planted_import_breaks_the_contracts(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "dspy_memory", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = {
        "dspy_memory/programs/answer.py": "from dspy_memory.store import Store  # planted\n",
        "dspy_memory/store/turns.py": "import dspy  # planted\n",
        "dspy_memory/read/context.py": "from dspy_memory.write.writer import Writer  # planted\n",
    }
    for name, line in planted.items():
        path = tmp_path / name
        path.write_text(path.read_text(encoding="utf-8") + line, encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "dspy_memory.programs.answer -> dspy_memory.store" in result.stdout
    assert "dspy_memory.store.turns -> dspy" in result.stdout
    assert "dspy_memory.read.context -> dspy_memory.write.writer" in result.stdout
    assert "BROKEN" in result.stdout


def test_no_sql_outside_the_store():
    assert sql_outside_store(PACKAGE) == []


def test_planted_sql_is_found(tmp_path):
    package = tmp_path / "dspy_memory"
    (package / "store").mkdir(parents=True)
    (package / "store" / "ok.py").write_text('Q = "SELECT id FROM memories"\n')
    (package / "read").mkdir()
    (package / "read" / "bad.py").write_text(
        '"""Reads rows: SELECT x FROM y in a docstring is prose."""\n'
        'QUERY = "SELECT content FROM memories WHERE user_id = ?"\n'
        "def purge(conn):\n"
        '    conn.execute("delete from memories")\n'
        '    return "INSERT OR IGNORE INTO t VALUES (1)"\n'
    )
    assert sql_outside_store(package) == [
        "dspy_memory/read/bad.py:2",
        "dspy_memory/read/bad.py:4",
        "dspy_memory/read/bad.py:5",
    ]


# -- clients go through the facade (docs/architecture.md) -----------------------------------------

# Memory's internals a client (agent tools, the service, the CLI) must not reach: its private
# parts, and the store behind it. `memory.keys`, `memory.audit(...)`, `memory.search(...,
# exact=True)` and the other public methods are how they get what they need.
CLIENTS = ("agent", "server", "cli")
# Client modules that hold the store on purpose, and why.
STORE_USERS = {
    "agent/blocks.py": "CoreMemory is a part of the facade (memory.blocks) over the store",
    "agent/profile.py": "Profiles is a part of the facade (memory.profiles) over the store",
    "cli/audit.py": "reads the audit log of a file without opening a Memory (that would resume episodes)",
    "cli/feedback.py": "`feedback show` prints the write run behind a record from the store's run log",
}


# Public API that starts with an underscore (namedtuples'), not a private part.
PUBLIC_UNDERSCORED = {"_asdict", "_replace", "_fields", "_make"}


def reaches_past_the_facade(package: Path) -> list[str]:
    """file:line of each `x.store` or `x._private` attribute a client module reads of another
    object (its own `self._...` is its business)."""
    found = []
    for client in CLIENTS:
        for path in sorted((package / client).rglob("*.py")):
            name = path.relative_to(package).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Attribute):
                    continue
                private = (
                    node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and node.attr not in PUBLIC_UNDERSCORED
                )
                own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                if (private and not own) or (node.attr == "store" and name not in STORE_USERS and not own):
                    found.append(f"{name}:{node.lineno} .{node.attr}")
    return found


def test_clients_reach_memory_only_through_its_public_surface():
    assert reaches_past_the_facade(PACKAGE) == []


def test_a_planted_reach_past_the_facade_is_found(tmp_path):
    package = tmp_path / "dspy_memory"
    for client in CLIENTS:
        (package / client).mkdir(parents=True)
    (package / "agent" / "bad.py").write_text(
        "def recall(memory, q):\n    return memory._retriever.search_at(q)\n"
    )
    (package / "server" / "bad.py").write_text("def keys(memory):\n    return memory.store.keys.list()\n")
    (package / "cli" / "ok.py").write_text("class A:\n    def f(self):\n        return self._x, self.store\n")
    assert reaches_past_the_facade(package) == ["agent/bad.py:2 ._retriever", "server/bad.py:2 .store"]


def test_the_clients_contract_catches_a_planted_store_import(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "dspy_memory", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "dspy_memory" / "server" / "routes.py"
    path.write_text(
        path.read_text(encoding="utf-8") + "from dspy_memory.store.keys import KeyStore  # planted\n"
    )
    result = lint_imports(tmp_path)
    assert "dspy_memory.server.routes -> dspy_memory.store.keys" in result.stdout
