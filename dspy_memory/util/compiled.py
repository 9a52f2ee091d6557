"""Which program runs: the write program for a mode and an LM, and compiled programs (saved by
`program.save`, e.g. from `python -m evals.optimize`) loaded from a folder."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import dspy

from dspy_memory.programs.compact import CompactWriter
from dspy_memory.programs.write import FusedWriter, TwoStepWriter
from dspy_memory.types import ProgramMode

# Which file holds which program: `write` is the fused writer, `write_compact` the compact one,
# `extract` and `reconcile` the two steps of TwoStepWriter.
PROGRAM_FILES = {
    "write": "write.json",
    "write_compact": "write_compact.json",
    "extract": "extract.json",
    "reconcile": "reconcile.json",
    "answer": "answer.json",
    "query": "query.json",
    "consolidate": "consolidate.json",
    "rerank": "rerank.json",
}
WRITERS: dict[ProgramMode, type[dspy.Module]] = {
    "fused": FusedWriter,
    "two_step": TwoStepWriter,
    "compact": CompactWriter,
}
# Model-string providers of local models, whose context window may be small (older Ollama: 2,048
# tokens, cut silently): "auto" gives them the compact program.
LOCAL_PROVIDERS = ("ollama", "ollama_chat")
# write.mode: a program, or "auto" to choose one per LM (resolve_write_mode).
ModeSetting = Literal[ProgramMode, "auto"]


def resolve_write_mode(mode: ModeSetting, model: str) -> ProgramMode:
    """The write program a write with the LM `model` (a DSPy model string) runs: `mode` itself,
    or for "auto" "compact" with a local Ollama model and "fused" with any other."""
    if mode != "auto":
        return mode
    provider, _, name = model.partition("/")
    return "compact" if provider in LOCAL_PROVIDERS and name else "fused"


def make_write_program(mode: ProgramMode) -> dspy.Module:
    """A write program as shipped, for a resolved mode (see resolve_write_mode)."""
    if mode not in WRITERS:
        raise ValueError(f"unknown write mode {mode!r}; choose one of {', '.join(map(repr, WRITERS))}")
    return WRITERS[mode]()


class WritePrograms:
    """The write program of each mode: compiled ones given by mode, the others built as shipped
    when first needed. A caller's own `program` runs for every LM instead; its mode is what its
    class is (a CompactWriter is "compact"), else the configured mode resolved for the LM."""

    def __init__(
        self, mode: ModeSetting, programs: Mapping[ProgramMode, Any] | None = None, *, program: Any = None
    ) -> None:
        self.mode = mode
        self._programs: dict[ProgramMode, Any] = dict(programs or {})
        self._program = program
        self._lock = threading.Lock()

    @classmethod
    def of(cls, mode: ModeSetting, given: Any = None) -> WritePrograms:
        """`given` as Memory passes it: WritePrograms (loaded compiled), a module of the caller's
        own, or None (the programs as shipped)."""
        return given if isinstance(given, WritePrograms) else cls(mode, program=given)

    def mode_for(self, model: str) -> ProgramMode:
        """The mode a write with the LM `model` (a DSPy model string) runs."""
        own = next((mode for mode, cls in WRITERS.items() if isinstance(self._program, cls)), None)
        return own or resolve_write_mode(self.mode, model)

    def program_for(self, mode: ProgramMode) -> Any:
        if self._program is not None:
            return self._program
        with self._lock:  # the background writer and callers may ask at once: build one
            if mode not in self._programs:
                self._programs[mode] = make_write_program(mode)
            return self._programs[mode]


def _parts(program: Any, mode: ProgramMode) -> dict[str, Any]:
    """The modules of a write program that are compiled and saved separately, by PROGRAM_FILES key."""
    if isinstance(program, TwoStepWriter):
        return {"extract": program.extractor, "reconcile": program.reconciler}
    return {"write_compact" if mode == "compact" else "write": program}


def load_write_program(
    directory: str | os.PathLike[str], mode: ModeSetting
) -> tuple[WritePrograms, dict[str, str]]:
    """The write programs for `mode` with the compiled parts found in `directory` ("auto": the
    fused and the compact one, either may run); returns them and {part: file} of what was loaded."""
    folder = Path(directory)
    if not folder.is_dir():
        raise FileNotFoundError(f"programs folder {str(folder)!r} does not exist")
    modes: tuple[ProgramMode, ...] = ("fused", "compact") if mode == "auto" else (mode,)
    programs = {resolved: make_write_program(resolved) for resolved in modes}
    loaded = {}
    for resolved, program in programs.items():
        for name, module in _parts(program, resolved).items():
            path = folder / PROGRAM_FILES[name]
            if path.exists():
                module.load(str(path))
                loaded[name] = str(path)
    return WritePrograms(mode, programs), loaded


def load_reading_programs(directory: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Compiled `answer` (MemoryAnswerer), `query` (QueryRewriter), `consolidate`
    (MemoryConsolidator) and `rerank` (MemoryReranker) programs found in `directory`: the
    programs that run after the write path, for `Memory.answer`, maintenance and recipe
    "rerank"."""
    from dspy_memory.programs.answer import MemoryAnswerer, QueryRewriter
    from dspy_memory.programs.consolidate import MemoryConsolidator
    from dspy_memory.programs.rerank import MemoryReranker

    folder = Path(directory)
    modules: dict[str, Any] = {}
    loaded: dict[str, str] = {}
    for name, make in (
        ("answer", MemoryAnswerer),
        ("query", QueryRewriter),
        ("consolidate", MemoryConsolidator),
        ("rerank", MemoryReranker),
    ):
        path = folder / PROGRAM_FILES[name]
        if path.exists():
            module = make()
            module.load(str(path))
            modules[name] = module
            loaded[name] = str(path)
    return modules, loaded
