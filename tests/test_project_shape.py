"""The promises of the README about set-up and commands hold."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETUP = ["bash scripts/demo.sh", "bash scripts/test.sh"]


def bash_lines():
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            command = line.split("#")[0].strip()
            if command:
                yield command


def test_readme_has_the_two_setup_commands_and_ci_runs_the_test_one():
    lines = list(bash_lines())
    assert lines[:2] == SETUP
    ci = (ROOT / ".ci" / "run").read_text()
    assert "exec bash scripts/test.sh" in ci
    for script in ("demo.sh", "test.sh", "_venv.sh"):
        assert (ROOT / "scripts" / script).is_file()
    assert "torch_index.py" in (ROOT / "scripts" / "_venv.sh").read_text()


def test_every_other_readme_command_exists_with_its_flags():
    for command in list(bash_lines())[2:]:
        parts = command.split()
        if parts[0] == "dspy-memory":  # the CLI: `dspy-memory [eval] NAME --help` lists its flags
            words = parts[1:3] if parts[1] == "eval" else parts[1:2]
            runner, rest = [sys.executable, "-m", "dspy_memory.cli", *words], parts[1 + len(words) :]
        else:
            assert parts[:2] == ["python", "-m"], command
            runner, rest = [sys.executable, "-m", parts[2]], parts[3:]
        help_text = subprocess.run(
            [*runner, "--help"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for flag in [p for p in rest if p.startswith("--")]:
            assert flag in help_text, (command, flag)


def test_code_is_lint_clean():
    import shutil

    import pytest

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "check", "dspy_memory", "evals", "tests"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_the_architecture_page_lists_every_module_where_it_is():
    """docs/architecture.md's tree has a line for each module of the package, under its folder."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    tree = text[text.index("```\ndspy_memory/") + 4 : text.index("```", text.index("```\ndspy_memory/") + 4)]
    listed, folders = set(), []
    for line in tree.splitlines()[1:]:
        name = line.strip().split(" ")[0]
        if not name.endswith((".py", "/")) or line.startswith(" " * 17):
            continue  # a continued description
        depth = (len(line) - len(line.lstrip())) // 2
        folders = folders[: depth - 1]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        else:
            listed.add("/".join([*folders, name]))
    package = ROOT / "dspy_memory"
    modules = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        # A package's __init__.py counts when it holds code, not only imports.
        if path.name != "__init__.py" or path.parent == package or "\ndef " in path.read_text()
    }
    assert modules - listed == set(), "modules missing from docs/architecture.md"
    assert listed - modules == set(), "docs/architecture.md lists modules that do not exist"
