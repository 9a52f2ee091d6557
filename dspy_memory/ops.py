"""What the write program answers, Fact and Op (lenient to how LMs spell them), and what became
of each op: AppliedOp or Rejection."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, field_validator

# What the write program may write (types.MemoryKind adds raw `turn`s).
FactKind = Literal["fact", "preference", "event", "procedure", "profile", "note"]
FACT_KINDS: tuple[FactKind, ...] = get_args(FactKind)
WriteAction = Literal["ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"]

# Words LMs use for our actions; anything else fails validation and the answer is retried.
_ACTION_SYNONYMS = {
    "INSERT": "ADD",
    "CREATE": "ADD",
    "NEW": "ADD",
    "EDIT": "UPDATE",
    "MODIFY": "UPDATE",
    "REFINE": "UPDATE",
    "EXPIRE": "INVALIDATE",
    "SUPERSEDE": "INVALIDATE",
    "CONTRADICT": "INVALIDATE",
    "REPLACE": "INVALIDATE",
    "FORGET": "DELETE",
    "REMOVE": "DELETE",
    "ERASE": "DELETE",
    "NONE": "NOOP",
    "NO_OP": "NOOP",
    "NO-OP": "NOOP",
    "SKIP": "NOOP",
    "KEEP": "NOOP",
}
_LEVELS = {"low": 0.3, "medium": 0.6, "high": 0.9}


def _lenient_unit(value: Any) -> Any:
    """0.8, "0.8", "80%", "high" -> a number in [0, 1]; anything else is left for validation."""
    if isinstance(value, str):
        text = value.strip().casefold()
        if text in _LEVELS:
            return _LEVELS[text]
        try:
            number = float(text.rstrip("%"))
        except ValueError:
            return value
        value = number / 100 if text.endswith("%") else number
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return value


def _action_word(value: Any, synonyms: dict[str, str]) -> Any:
    """An action as LMs spell it ("noop", "Insert") -> ours; anything else is left for validation."""
    if isinstance(value, str):
        word = value.strip().upper()
        return synonyms.get(word, word)
    return value


def _alias_number(value: Any) -> Any:
    """ "3", "#3", "[3]", "m3" -> 3; "", "none" -> None; anything else stays and fails validation."""
    if isinstance(value, str):
        digits = value.strip().strip("[]#()").lstrip("mM").strip()
        if digits.isdigit():
            return int(digits)
        if not digits or digits.casefold() in ("none", "null"):
            return None
    return value


def _lenient_text(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and not value.strip():
        return None
    return value


class _LenientFactFields(BaseModel):
    """Coercions for what LMs write in fact fields ("high" confidence, 2024 as a date, "" for
    none). Values still invalid after coercion fail validation."""

    @field_validator("kind", mode="before", check_fields=False)
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().casefold()
            return value if value in FACT_KINDS else "fact"
        return value

    @field_validator("confidence", "importance", mode="before", check_fields=False)
    @classmethod
    def _unit(cls, value: Any) -> Any:
        return _lenient_unit(value)

    @field_validator(
        "content",
        "subject",
        "predicate",
        "object",
        "valid_at",
        "invalid_at",
        "reason",
        mode="before",
        check_fields=False,
    )
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _lenient_text(value)


_CONTENT = "A self-contained sentence with names, numbers and absolute dates"
_SUBJECT = "Who or what the fact is about, by name"
_PREDICATE = "The relation, snake_case, e.g. lives_in, works_at, likes"
_OBJECT = "The other end of the relation, if it is a named thing"
_VALID_AT = "When it became true, YYYY-MM-DD, if known"
_INVALID_AT = "When it stopped being true, YYYY-MM-DD, if known"


class Fact(_LenientFactFields):
    """One self-contained statement worth remembering, extracted from a conversation."""

    content: str = Field(description=_CONTENT)
    kind: FactKind = "fact"
    subject: str | None = Field(None, description=_SUBJECT)
    predicate: str | None = Field(None, description=_PREDICATE)
    object: str | None = Field(None, description=_OBJECT)
    valid_at: str | None = Field(None, description=_VALID_AT)
    invalid_at: str | None = Field(None, description=_INVALID_AT)
    confidence: float = Field(1.0, ge=0, le=1)
    importance: float = Field(0.5, ge=0, le=1)


class Op(_LenientFactFields):
    """A decision about memory. `target` is the alias (a small integer shown in the prompt) of
    the existing memory it acts on; ADD has none. ADD, UPDATE and INVALIDATE carry the new
    content; INVALIDATE with `correction` means the target was never true."""

    action: WriteAction
    target: int | None = Field(None, description="Alias of the existing memory acted on; none for ADD")
    content: str | None = Field(None, description=_CONTENT + "; none for DELETE and NOOP")
    kind: FactKind = "fact"
    subject: str | None = Field(None, description=_SUBJECT)
    predicate: str | None = Field(None, description=_PREDICATE)
    object: str | None = Field(None, description=_OBJECT)
    valid_at: str | None = Field(None, description=_VALID_AT)
    invalid_at: str | None = Field(None, description=_INVALID_AT)
    confidence: float = Field(1.0, ge=0, le=1)
    importance: float = Field(0.5, ge=0, le=1)
    correction: bool = Field(
        False, description="INVALIDATE only: true if the old memory was never true (a mistake corrected)"
    )
    reason: str | None = Field(None, description="Why, in a few words")

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        return _action_word(value, _ACTION_SYNONYMS)

    @field_validator("target", mode="before")
    @classmethod
    def _alias(cls, value: Any) -> Any:
        return _alias_number(value)


class AppliedOp(BaseModel):
    """One decision of the write program that was applied."""

    action: WriteAction
    memory_id: str
    content: str | None = None
    # ADD, UPDATE, INVALIDATE: the new content; NOOP: the content of the memory confirmed.
    # For INVALIDATE: the memory that stopped being true (memory_id is the new fact).
    replaced_id: str | None = None
    correction: bool = False
    reason: str | None = None


class Rejection(BaseModel):
    """A decision of the write program that was not applied (or applied as another action),
    and why. Reasons never quote memory content, so they can be logged; a reason may name a
    relation (a predicate), so the run log's per-operation rows keep only `code`, a fixed word
    (write/validate.py)."""

    index: int
    action: str | None = None
    reason: str
    code: str | None = None


# -- consolidation (lifecycle/consolidate.py applies these) -----------------------------------

ConsolidationAction = Literal["MERGE", "SUMMARIZE", "KEEP"]
_CONSOLIDATION_SYNONYMS = {
    "COMBINE": "MERGE",
    "DEDUPLICATE": "MERGE",
    "DEDUP": "MERGE",
    "SUMMARISE": "SUMMARIZE",
    "SUMMARY": "SUMMARIZE",
    "CONDENSE": "SUMMARIZE",
    "NOOP": "KEEP",
    "NONE": "KEEP",
    "SKIP": "KEEP",
}


class ClusterMemory(BaseModel):
    """A current memory shown to the consolidation program, under a small integer alias."""

    alias: int
    content: str
    kind: str = "fact"
    valid_at: str | None = Field(None, description="When it became true (YYYY-MM-DD), if known")
    recalls: int = Field(0, description="How often it was recalled")


class ConsolidationOp(BaseModel):
    """A decision about some memories of a cluster. MERGE: `content` is one sentence that says
    everything the memories say (they are replaced by it). SUMMARIZE: `content` condenses them
    (they are archived, the summary points to them). KEEP: leave them as they are."""

    action: ConsolidationAction
    aliases: list[int] = Field(default_factory=list, description="Aliases of the memories it covers")
    content: str | None = Field(None, description="MERGE and SUMMARIZE: the new memory's text")
    reason: str | None = Field(None, description="Why, in a few words")

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        return _action_word(value, _CONSOLIDATION_SYNONYMS)

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases(cls, value: Any) -> Any:
        # 3, "3", "1, 2", ["#1", "m2"] -> [ints]; anything else stays and fails validation.
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            value = str(value).replace(";", ",").split(",")
        return [_alias_number(item) for item in value] if isinstance(value, list) else value

    @field_validator("content", "reason", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _lenient_text(value)
