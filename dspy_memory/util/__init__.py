"""Plumbing shared by the paths: text normalization, times, token counts, LM construction and Ollama, compiled programs."""
