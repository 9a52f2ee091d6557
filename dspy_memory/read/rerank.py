"""The rerank stage of recipe "rerank": the top hybrid candidates re-ordered by a reranker.

Two rerankers, chosen by `RetrievalConfig.reranker`:
- "lm" (or "lm:<model>"): the MemoryReranker program (programs/rerank.py) on the Memory's LM
  (or that model), called through util/lm.run_program like every other program;
- "cross-encoder:<model>": sentence-transformers' CrossEncoder (the `rerank` extra), a Hugging
  Face model name or a folder holding one.

A reranker only proposes an order. `reorder` applies it, and it alone decides what a search
returns: every candidate stays, none is added, and what the reranker did not place (left out,
repeated, out of range, or its whole answer unusable) follows what it did, in hybrid order.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from dspy_memory.errors import InvalidInputError, RerankerUnavailableError, WriteProgramError
from dspy_memory.types import MemoryRecord
from dspy_memory.util.lm import lm_for, make_lm, run_program, short_error
from dspy_memory.util.text import day

logger = logging.getLogger("dspy_memory")

# A memory's text is cut to this many characters in the LM's prompt: 30 candidates of a few
# sentences each fit a small model's window; a long document would crowd out the others.
LM_TEXT_CHARS = 1000
# The LM reranker's attempts: a malformed answer is asked again once (a search waits for it).
LM_ATTEMPTS = 2
EXTRA_HINT = (
    "pip install 'dspy-memory[rerank]' (on machines without a GPU, install torch from "
    "https://download.pytorch.org/whl/cpu first to avoid downloading CUDA)"
)

# (index into the candidates, the reranker's score or None), best first.
Placement = tuple[int, float | None]


class Reranker(Protocol):
    name: str

    def order(self, query: str, memories: Sequence[MemoryRecord], today: str) -> list[Placement]:
        """Indices of `memories` (best first) with their scores; it may leave some out."""
        ...


def reranker_problem(spec: object) -> str | None:
    """Why `spec` names no reranker (None when it does): "lm", "lm:<model>" or
    "cross-encoder:<model>"."""
    if not isinstance(spec, str):
        return "should be 'lm', 'lm:<model>' or 'cross-encoder:<model>'"
    kind, colon, model = spec.partition(":")
    if kind == "lm" and (not colon or model.strip()):
        return None
    if kind == "cross-encoder" and model.strip():
        return None
    return (
        f"{spec!r} names no reranker; use 'lm' (the Memory's LM), 'lm:<model>' (e.g. "
        "'lm:openai/gpt-4o-mini') or 'cross-encoder:<model>' (e.g. "
        "'cross-encoder:BAAI/bge-reranker-base', the `rerank` extra)"
    )


def make_reranker(spec: str, *, lm: Any = None, program: Any = None, timeout_s: float = 30.0) -> Reranker:
    """The reranker a spec names (see reranker_problem). `lm` is the Memory's LM (None: dspy's
    configured one, looked up at each search); `program` a compiled MemoryReranker. Nothing is
    loaded or called here: a cross-encoder loads on its first search."""
    problem = reranker_problem(spec)
    if problem is not None:
        raise InvalidInputError(problem)
    kind, _, model = spec.partition(":")
    if kind == "cross-encoder":
        return CrossEncoderReranker(model.strip())
    return LMReranker(make_lm(model.strip()) if model else lm, program=program, timeout_s=timeout_s)


class CrossEncoderReranker:
    """Scores each (query, memory text) pair with a sentence-transformers CrossEncoder."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = f"cross-encoder:{model}"
        self._encoder: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:  # concurrent first searches load the model once
            if self._encoder is None:
                try:
                    from sentence_transformers import CrossEncoder
                except ImportError:
                    raise RerankerUnavailableError(
                        f"the reranker {self.name!r} needs sentence-transformers: {EXTRA_HINT}. "
                        "Or use retrieval.reranker='lm'."
                    ) from None
                try:
                    self._encoder = CrossEncoder(self.model)
                except Exception as exc:  # offline, unknown model, a folder that holds none
                    raise RerankerUnavailableError(
                        f"could not load the cross-encoder {self.model!r}: {short_error(exc)}. "
                        "Without a network, name a folder that holds the model's files "
                        "(cross-encoder:/path/to/model)."
                    ) from exc
            return self._encoder

    def order(self, query: str, memories: Sequence[MemoryRecord], today: str) -> list[Placement]:
        if not memories:
            return []
        encoder = self._load()
        try:
            scores = [
                float(score) for score in _flat(encoder.predict([(query, m.content) for m in memories]))
            ]
        except Exception as exc:
            raise RerankerUnavailableError(
                f"the cross-encoder {self.model!r} failed: {short_error(exc)}"
            ) from exc
        if len(scores) != len(memories):
            raise RerankerUnavailableError(
                f"the cross-encoder {self.model!r} gave {len(scores)} scores for {len(memories)} "
                "pairs: it is not a reranker (one relevance score per pair)"
            )
        # A score that is not a number places nothing: that memory keeps its hybrid place.
        finite = [index for index, score in enumerate(scores) if math.isfinite(score)]
        return [(index, scores[index]) for index in sorted(finite, key=lambda i: -scores[i])]


def _flat(scores: Any) -> list[Any]:
    """One score per pair: a model with one output gives a list or an (n, 1) array."""
    rows = scores.tolist() if hasattr(scores, "tolist") else list(scores)
    return [row[0] if isinstance(row, list) and len(row) == 1 else row for row in rows]


class LMReranker:
    """Orders memories with the MemoryReranker program. An LM that fails on every attempt or
    does not answer within `timeout_s` leaves the hybrid order (logged); no LM at all is an
    error (LMUnavailableError) saying how to set one."""

    name = "lm"

    def __init__(self, lm: Any = None, *, program: Any = None, timeout_s: float = 30.0) -> None:
        self.lm = lm
        self.timeout_s = timeout_s
        self._program = program
        self._lock = threading.Lock()

    @property
    def program(self) -> Any:
        with self._lock:
            if self._program is None:
                from dspy_memory.programs.rerank import MemoryReranker

                self._program = MemoryReranker()
            return self._program

    def order(self, query: str, memories: Sequence[MemoryRecord], today: str) -> list[Placement]:
        lm = lm_for(self.lm, True, purpose="search(recipe='rerank') with retrieval.reranker='lm'")
        if not memories:
            return []
        inputs = {"query": query, "today": today, "memories": lm_candidates(memories)}
        try:
            prediction, _ = run_program(
                self.program, lm, inputs, max_attempts=LM_ATTEMPTS, timeout_s=self.timeout_s
            )
        except WriteProgramError as exc:
            logger.warning("the LM reranker gave no usable order (%s); the hybrid order stands", exc)
            return []
        return lm_placements(prediction.ranking)


def lm_candidates(memories: Sequence[MemoryRecord]) -> list[Any]:
    """How memories are shown to the LM reranker: ids from 1 in search order, text cut to
    LM_TEXT_CHARS, the day it became true (else was stored)."""
    from dspy_memory.programs.rerank import RerankCandidate

    return [
        RerankCandidate(
            id=alias,
            text=record.content[:LM_TEXT_CHARS],
            date=day(record.valid_at or record.created_at, missing="") or None,
        )
        for alias, record in enumerate(memories, start=1)
    ]


def lm_placements(ranking: object) -> list[Placement]:
    """The LM's answer (ids shown from 1) as placements; `reorder` drops what is no candidate."""
    return [(alias - 1, None) for alias in ranking if type(alias) is int] if isinstance(ranking, list) else []


def reorder(
    ranked: list[tuple[int, dict[str, Any]]], placements: Sequence[Placement], *, pool: int
) -> list[tuple[int, dict[str, Any]]]:
    """`ranked` (row id, score details; hybrid order) with its first `pool` entries in the order
    of `placements` (indices into them): placed entries first, each at its first mention, with
    `rerank_rank` (1-based) and `rerank_score` in their details; then the unplaced ones of the
    pool and everything after it, in hybrid order. Nothing is dropped or added."""
    head, tail = ranked[:pool], ranked[pool:]
    placed: list[int] = []
    chosen: set[int] = set()
    for index, score in placements:
        if type(index) is not int or not 0 <= index < len(head) or index in chosen:
            continue
        placed.append(index)
        chosen.add(index)
        detail = head[index][1]
        detail["rerank_rank"] = len(placed)
        detail["rerank_score"] = score
        if len(placed) == len(head):
            break
    return [head[i] for i in placed] + [entry for i, entry in enumerate(head) if i not in chosen] + tail


def rerank(
    reranker: Reranker,
    query: str,
    ranked: list[tuple[int, dict[str, Any]]],
    records: dict[int, MemoryRecord],
    *,
    today: str,
    pool: int,
) -> list[tuple[int, dict[str, Any]]]:
    """`ranked` (hybrid order, every row id in `records`) with its top `pool` re-ordered by
    `reranker` (see `reorder`)."""
    head = [records[row_id] for row_id, _ in ranked[:pool]]
    return reorder(ranked, reranker.order(query, head, today), pool=pool)
