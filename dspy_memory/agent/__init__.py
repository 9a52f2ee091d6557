"""What agents use: ReAct tools, MemoryReAct, the planner tool card, core memory blocks and profiles."""
