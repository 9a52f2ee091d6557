"""Types are checked (docs/architecture.md): mypy, configured in pyproject.toml, finds no error
in dspy_memory/; every `type: ignore` names its error code and says why on its line; files stay
short enough to read in one sitting. Each check is shown to fail on a planted violation."""

from __future__ import annotations

import fnmatch
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Sequence
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dspy_memory"
MAX_LINES = 400
# The facade is exempt on purpose: Memory's whole public surface reads in one place, as short
# typed delegations (docs/architecture.md), and that surface is longer than 400 lines.
LONG_ON_PURPOSE = {"dspy_memory/memory.py"}

IGNORE = re.compile(r"type:\s*ignore\b(?P<codes>\[[^\]]*\])?(?P<after>.*)")
REASON = re.compile(r"\s*#\s*\S")


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # The cache persists between runs (.mypy_cache, git-ignored): a warm check takes seconds.
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--cache-dir", str(ROOT / ".mypy_cache"), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)


def unchecked_modules() -> list[str]:
    """The module patterns whose errors pyproject.toml tells mypy to ignore."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    overrides = config["tool"]["mypy"].get("overrides", [])
    patterns: list[str] = []
    for override in overrides:
        if override.get("ignore_errors"):
            module = override["module"]
            patterns += [module] if isinstance(module, str) else module
    return patterns


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_unchecked(module: str, patterns: list[str]) -> bool:
    # mypy's patterns: "a.b.*" is a.b and everything under it.
    return any(
        module == pattern or fnmatch.fnmatchcase(module, pattern) or module == pattern.removesuffix(".*")
        for pattern in patterns
    )


def unexplained_ignores(package: Path, skip: Sequence[str] = ()) -> list[str]:
    """file:line of each `type: ignore` comment without an error code, or without a reason after
    it (`# type: ignore[code]  # why`), in the modules mypy checks."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if is_unchecked(module_name(path, package), list(skip)):
            continue
        source = path.read_text(encoding="utf-8")
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = IGNORE.search(token.string)
            if match is None:
                continue
            codes = (match["codes"] or "[]")[1:-1].strip()
            if not codes or not REASON.match(match["after"]):
                found.append(f"{path.relative_to(package.parent)}:{token.start[0]}: {token.string}")
    return found


def long_files(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in LONG_ON_PURPOSE:
            found.append(f"{name}: {lines} lines")
    return found


def test_mypy_finds_no_error_in_the_package():
    result = mypy()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_with_the_project_config_reports_a_planted_error(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def half(n: int) -> int:\n"
        "    return n / 2\n"
        "def untyped(n):\n"
        "    return n\n"
        "x: int = 1  # type: ignore[assignment]  # unused: the config warns about it\n",
        encoding="utf-8",
    )
    result = mypy(str(planted), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "planted.py:2: error: Incompatible return value type" in result.stdout
    assert "planted.py:3: error: Function is missing a type annotation" in result.stdout
    assert 'planted.py:5: error: Unused "type: ignore" comment' in result.stdout


def test_every_type_ignore_names_its_error_code_and_says_why():
    assert unexplained_ignores(PACKAGE, unchecked_modules()) == []


def test_a_type_ignore_without_a_code_or_a_reason_is_found(tmp_path):
    package = tmp_path / "dspy_memory"
    (package / "store").mkdir(parents=True)
    (package / "store" / "ok.py").write_text(
        "x = f()  # type: ignore[attr-defined]  # f comes from an untyped package\n"
        'TEXT = "a string saying # type: ignore is not a comment"\n'
    )
    (package / "bad.py").write_text(
        "a = f()  # type: ignore\n"
        "b = f()  # type: ignore  # a reason, but no code\n"
        "c = f()  # type: ignore[]  # an empty code\n"
        "d = f()  # type: ignore[attr-defined]\n"
        "e = f()  # type: ignore[attr-defined]  #\n"
    )
    (package / "skipped").mkdir()
    (package / "skipped" / "old.py").write_text("a = f()  # type: ignore\n")
    assert unexplained_ignores(package, ["dspy_memory.skipped.*"]) == [
        "dspy_memory/bad.py:1: # type: ignore",
        "dspy_memory/bad.py:2: # type: ignore  # a reason, but no code",
        "dspy_memory/bad.py:3: # type: ignore[]  # an empty code",
        "dspy_memory/bad.py:4: # type: ignore[attr-defined]",
        "dspy_memory/bad.py:5: # type: ignore[attr-defined]  #",
    ]


def test_no_file_in_the_package_is_longer_than_400_lines():
    assert long_files(PACKAGE) == []


def test_a_long_file_is_found_and_the_facade_is_exempt(tmp_path):
    package = tmp_path / "dspy_memory"
    (package / "read").mkdir(parents=True)
    (package / "read" / "long.py").write_text("x = 1\n" * 401)
    (package / "read" / "short.py").write_text("x = 1\n" * 400)
    (package / "memory.py").write_text("x = 1\n" * 900)
    assert long_files(package) == ["dspy_memory/read/long.py: 401 lines"]
