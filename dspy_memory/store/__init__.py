"""The only package that speaks SQL. Nothing here imports DSPy."""

from dspy_memory.store.queries import Candidate, Predicate, TimeView
from dspy_memory.store.sqlite.connection import resolve_driver
from dspy_memory.store.store import Store
from dspy_memory.store.writes import NewMemory

__all__ = ["Candidate", "NewMemory", "Predicate", "Store", "TimeView", "resolve_driver"]
