"""Evaluation loaders, runners and benchmarks for dspy-memory (run with python -m evals.<name>)."""
