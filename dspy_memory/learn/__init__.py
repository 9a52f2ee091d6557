"""Compiling the memory programs: DSPy's optimizers with LM calls counted by role, the write
programs' metric, seeded comparisons with paired intervals, and learning from a memory's own
feedback."""
