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
