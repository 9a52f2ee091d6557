"""ToolSettings: what the agent memory tools may put into a model's context and which core blocks
they may start (`MemoryConfig.tools`; docs/agents.md). Apart from config.py only to keep that
file readable in one sitting; MemoryConfig imports it, and it imports nothing of the package."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

# A core block's label and the largest character limit (agent/blocks.py checks every block).
BLOCK_LABEL_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"
MAX_BLOCK_CHARS = 10_000_000
BlockLabel = Annotated[str, StringConstraints(pattern=f"^{BLOCK_LABEL_PATTERN}$")]


class ToolSettings(BaseModel):
    """The agent tools of `memory.tools()` and the MCP server (docs/agents.md#bounded-answers)."""

    model_config = ConfigDict(extra="forbid")

    # The most characters of one line of a tool's answer (one memory, one event, one error);
    # the rest is cut with a marker that says how much. 2,000 shows every memory the write
    # program makes (write.max_content_chars is 1,000) and a full default core block whole;
    # raw turns and texts set by the developer may be longer.
    max_item_chars: int = Field(2000, ge=200, le=1_000_000)
    # The most characters of one answer, markers included; whole lines past it are left out
    # with a marker saying how many. 8,000 characters is about 2,000 tokens: a ReAct agent keeps
    # every answer in its trajectory, and Ollama models get an 8,192-token window here
    # (lm_num_ctx), so one answer stays under a quarter of it; recall's 20 hits at most fit at
    # 400 characters each.
    max_output_chars: int = Field(8000, ge=500, le=10_000_000)
    # Core blocks core_memory_append may start when missing, with their character limits. Letta
    # agents start with "human" (about the user) and "persona" (about the agent); other labels
    # are created by the developer (memory.blocks.set). {}: agents start none.
    default_blocks: dict[BlockLabel, Annotated[int, Field(ge=1, le=MAX_BLOCK_CHARS)]] = Field(
        default_factory=lambda: {"human": 2000, "persona": 2000}
    )

    @model_validator(mode="after")
    def _item_fits_in_answer(self) -> ToolSettings:
        if self.max_item_chars > self.max_output_chars:
            raise ValueError(
                f"max_item_chars ({self.max_item_chars}) must not exceed max_output_chars "
                f"({self.max_output_chars}): one line must fit in an answer"
            )
        return self
