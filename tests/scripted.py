"""Scripted write programs for tests: small rule-based LMs that answer the write signatures."""

from __future__ import annotations

import threading
from collections.abc import Callable

from dspy_memory.testing import LMCall, scripted_lm

Decide = Callable[[list[dict], list[dict]], list[dict]]


def fused_lm(decide: Decide):
    """An LM answering WriteMemories with decide(turns, existing_memories) -> op dicts."""

    def responder(call: LMCall):
        assert call.output_fields == ["ops"] and "turns" in call.inputs, call.signature
        return {"ops": decide(call.inputs["turns"], call.inputs["existing_memories"])}

    return scripted_lm(responder)


def alias_of(existing: list[dict], *words: str) -> int | None:
    """The alias of the first existing memory whose content contains every word."""
    for memory in existing:
        if all(word.lower() in memory["content"].lower() for word in words):
            return memory["alias"]
    return None


class Gate:
    """Makes a responder wait until the test opens the gate (to observe background work)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()

    def wrap(self, responder):
        def gated(call):
            self.entered.set()
            assert self.opened.wait(timeout=30), "gate never opened"
            return responder(call)

        return gated
