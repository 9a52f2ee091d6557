"""The promises of the README about set-up and commands hold."""

import argparse
import contextlib
import importlib
import inspect
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- every `python -m evals.X ...` quoted in the README and docs/ parses ----------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A synopsis rather than a command: [optional] parts, a|b choices, ..., NAME placeholders.
SYNOPSIS = re.compile(r"[\[\]|]|\.\.\.|\b[A-Z][A-Z0-9_]+\b")


def quoted_eval_commands():
    """(file, module, arguments) of each `python -m evals.X ...` in a code block (a line, with its
    backslash continuations, up to a comment) or in inline code (which may wrap a line)."""
    for path in DOCS:
        text = path.read_text()
        spans = []
        for block in re.findall(r"```[\w-]*\n(.*?)```", text, flags=re.S):
            spans += [line.split(" #")[0] for line in block.replace("\\\n", " ").splitlines()]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        spans += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
        for span in spans:
            for found in re.finditer(r"python -m (evals(?:\.\w+)+)(.*)", span):
                yield path.relative_to(ROOT).as_posix(), found.group(1), found.group(2).strip()


class _Parser(Exception):
    def __init__(self, parser):
        self.parser = parser


def eval_parser(module_name):
    """The argparse parser that `python -m <module_name>` parses its arguments with, built by
    the module's main() and taken from it before it parses anything (so nothing runs); None
    for a module that takes no arguments."""
    module = importlib.import_module(module_name)
    if "parse_args(" not in inspect.getsource(module):
        return None

    def caught(parser, *args, **kwargs):
        raise _Parser(parser)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
        try:
            module.main([])
        except _Parser as taken:
            return taken.parser
    raise AssertionError(f"{module_name}.main(argv) did not parse its arguments with argparse")


def options_of(parser):
    """Every option string of `parser` and of its subcommands' parsers."""
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= options_of(sub)
    return found


def problem_with(parser, arguments):
    """Why `arguments` are not a valid command line for `parser` (its own error), or None."""
    words = shlex.split(arguments)
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
        try:
            parser.parse_args(words)
            return None
        except SystemExit as stop:
            if stop.code == 0:  # --help
                return None
    if SYNOPSIS.search(arguments):  # a synopsis need only name options that exist
        named = [word.strip("[]").split("=")[0] for word in words]
        unknown = [word for word in named if word.startswith("-") and word not in options_of(parser)]
        return f"unknown options {unknown}" if unknown else None
    return said.getvalue().strip().splitlines()[-1]


def test_every_eval_command_in_the_readme_and_docs_parses():
    commands = list(quoted_eval_commands())
    assert len(commands) > 50 and {"README.md", "docs/evals.md"} <= {path for path, _, _ in commands}
    parsers, wrong = {}, []
    for path, module, arguments in commands:
        if not (ROOT / (module.replace(".", "/") + ".py")).is_file():
            wrong.append(f"{path}: python -m {module} {arguments}: no such module")
            continue
        if module not in parsers:
            parsers[module] = eval_parser(module)
        if parsers[module] is None:
            problem = f"takes no arguments, given {arguments!r}" if arguments else None
        else:
            problem = problem_with(parsers[module], arguments)
        if problem:
            wrong.append(f"{path}: python -m {module} {arguments}: {problem}")
    assert not wrong, "\n".join(wrong)
