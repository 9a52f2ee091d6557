"""`python -m dspy_memory.cli` is `dspy-memory`."""

from dspy_memory.cli import main

raise SystemExit(main())
