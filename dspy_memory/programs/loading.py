"""Loading compiled programs (saved by `program.save`, e.g. from `python -m evals.optimize`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dspy_memory.programs.write import TwoStepWriter, make_write_program

# Which file holds which program; `write` is the fused writer, `extract` and `reconcile` the
# two steps of TwoStepWriter.
PROGRAM_FILES = {
    "write": "write.json",
    "extract": "extract.json",
    "reconcile": "reconcile.json",
    "answer": "answer.json",
    "query": "query.json",
}


def load_write_program(directory: str | os.PathLike[str], mode: str) -> tuple[Any, dict[str, str]]:
    """The write program for `mode` with the compiled parts found in `directory`; returns it
    and {part: file} of what was loaded."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"programs folder {str(folder)!r} does not exist")
    program = make_write_program(mode)
    parts = {"write": program} if mode == "fused" else {}
    if isinstance(program, TwoStepWriter):
        parts = {"extract": program.extractor, "reconcile": program.reconciler}
    loaded = {}
    for name, module in parts.items():
        path = folder / PROGRAM_FILES[name]
        if path.exists():
            module.load(str(path))
            loaded[name] = str(path)
    return program, loaded


def load_reading_programs(directory: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Compiled `answer` (MemoryAnswerer) and `query` (QueryRewriter) programs found in
    `directory`, for `Memory.answer`."""
    from dspy_memory.programs.answer import MemoryAnswerer, QueryRewriter

    folder = Path(directory)
    modules: dict[str, Any] = {}
    loaded: dict[str, str] = {}
    for name, make in (("answer", MemoryAnswerer), ("query", QueryRewriter)):
        path = folder / PROGRAM_FILES[name]
        if path.exists():
            module = make()
            module.load(str(path))
            modules[name] = module
            loaded[name] = str(path)
    return modules, loaded
