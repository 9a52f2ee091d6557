"""Request and response bodies of the memory service (server/app.py): the seed endpoints' shapes
exactly, and the /v1 bodies; answers are the records of types.py.

The schema says what the code enforces (docs/server.md#the-contract): every rule the library
applies that JSON Schema can express is a constraint here (ranges, choices, non-blank text, id
patterns, strict booleans, which fields exclude each other), so a request the OpenAPI document
calls valid is never refused for its shape, and one it calls invalid is refused with 422."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, model_validator
from typing_extensions import TypeAliasType, TypedDict

from dspy_memory.agent.blocks import MAX_CHAR_LIMIT
from dspy_memory.server.key_record import SCOPE_FIELDS
from dspy_memory.server.time_fields import Interval, When
from dspy_memory.types import EPISODE_SOURCES, FEEDBACK_SOURCES, FEEDBACK_VERDICTS, MAX_K, RECIPE_NAMES
from dspy_memory.types import MEMORY_KINDS as _KINDS

# -- shared field types -------------------------------------------------------------------------

# Text with a character Python's str.strip() keeps (JSON Schema's \S differs: it counts U+0085
# and U+001C-U+001F as text, U+FEFF as a space). Patterns search, so one such character will do.
NOT_BLANK = r"[^\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
ScopeId = Annotated[
    str,
    Field(min_length=1, max_length=256, pattern=NOT_BLANK, description="an id of the scope (not blank)"),
]
MEMORY_ID_PATTERN = r"^[0-9a-f][0-9a-f-]{7,35}$"
MemoryId = Annotated[
    str,
    Field(
        pattern=MEMORY_ID_PATTERN,
        description="a memory's id, or a unique prefix of at least 8 characters",
        examples=["3f2b8c1e-5d7a-4e59-9a51-0c6de1b0a7f4"],
    ),
]
KEY_ID_PATTERN = r"^[0-9a-f]{1,32}$"
BLOCK_LABEL_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
Text = Annotated[str, Field(description="text (any Unicode)")]
Content = Annotated[str, Field(pattern=NOT_BLANK, description="text to remember (not blank)")]
MAX_LIMIT = 10_000  # rows one request may list
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
Offset = Annotated[int, Field(ge=0, le=2**53 - 1)]  # a float in the document: exact up to 2**53
MAX_BUDGET_TOKENS = 1_000_000
BudgetTokens = Annotated[int, Field(ge=1, le=MAX_BUDGET_TOKENS)]
Kind = Literal[_KINDS]  # type: ignore[valid-type]  # a Literal of values kept once, in the library
_RECIPES = RECIPE_NAMES
Recipe = Literal[_RECIPES]  # type: ignore[valid-type]  # a Literal of values kept once, in the library
Verdict = Literal[FEEDBACK_VERDICTS]  # type: ignore[valid-type]  # a Literal of values kept once, in the library
FeedbackSource = Literal[FEEDBACK_SOURCES]  # type: ignore[valid-type]  # a Literal of values kept once, in the library
EpisodeSource = Literal[EPISODE_SOURCES]  # type: ignore[valid-type]  # a Literal of values kept once, in the library

# JSON values the file stores and gives back unchanged. The library takes 64-bit integers; the
# service takes JavaScript's safe integers, which every JSON client reads exactly (and which the
# OpenAPI document can state: its bounds are floats), and floats in the same range (JSON Schema
# cannot tell 1e19 from an integer). Bigger numbers go in as strings.
SAFE_INTEGER = 2**53 - 1
SafeInt = Annotated[int, Field(ge=-SAFE_INTEGER, le=SAFE_INTEGER)]
SafeFloat = Annotated[float, Field(ge=-SAFE_INTEGER, le=SAFE_INTEGER)]
Scalar = None | StrictBool | SafeInt | SafeFloat | str
JsonValue = TypeAliasType("JsonValue", "Scalar | list[JsonValue] | dict[str, JsonValue]")
JsonObject = dict[str, JsonValue]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str = Field(
        description="a stable snake_case code (docs/server.md#errors)", examples=["invalid_request"]
    )
    message: str = Field(description="what went wrong and what to do, for people")


class ErrorBody(BaseModel):
    """Every error the service answers: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


Operators = TypedDict(
    "Operators",
    {
        "$eq": Scalar,
        "$ne": Scalar,
        "$gt": Scalar,
        "$gte": Scalar,
        "$lt": Scalar,
        "$lte": Scalar,
        "$in": list[Scalar],
        "$nin": list[Scalar],
        "$exists": StrictBool,
    },
    total=False,
)
Operators.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]  # pydantic reads it off a TypedDict


def _some_operator(value: Any) -> Any:
    if isinstance(value, dict) and not value:
        raise ValueError("a condition names at least one operator ($eq, $in, $exists, ...)")
    return value


FILTER_KEY = r'^[^"\\]{1,200}$'  # a metadata key the filter SQL can quote
Condition = (
    Scalar
    | Annotated[Operators, AfterValidator(_some_operator), Field(json_schema_extra={"minProperties": 1})]
)


def _filter_keys(filters: dict[str, Any]) -> dict[str, Any]:
    for key in filters:
        if not re.fullmatch(FILTER_KEY, key):
            raise ValueError(
                f"a filter key is 1-200 characters without quotes or backslashes, not {key[:40]!r}"
            )
    return filters


FilterMap = Annotated[
    dict[str, Condition],
    AfterValidator(_filter_keys),
    Field(json_schema_extra={"propertyNames": {"pattern": FILTER_KEY}}),
]


# -- the seed endpoints -------------------------------------------------------------------------


class SeedScope(BaseModel):
    """The seed endpoints' `metadata`: the scope's ids, and the rest."""

    user_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    run_id: ScopeId | None = None

    def split(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the scope ids, the rest)."""
        return {field: getattr(self, field) for field in SCOPE_FIELDS}, dict(self.model_extra or {})


class SeedMetadata(SeedScope):
    """The memory's metadata besides the scope ids."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, JsonValue] = Field(init=False)


class SeedFilters(SeedScope):
    """Search filters on metadata keys besides the scope ids (as `filters` of /v1/search)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"propertyNames": {"pattern": FILTER_KEY}})
    __pydantic_extra__: dict[str, Condition] = Field(init=False)

    @model_validator(mode="after")
    def _keys(self) -> SeedFilters:
        _filter_keys(self.model_extra or {})
        return self


class StoreRequest(_Body):
    content: Content
    metadata: SeedMetadata = Field(default_factory=SeedMetadata)


class StoreResponse(BaseModel):
    memory_id: str
    status: str = "stored"


class RetrieveRequest(_Body):
    query: Text
    top_k: Annotated[int, Field(ge=1, le=MAX_K)] = 5
    metadata: SeedFilters = Field(default_factory=SeedFilters)


class RetrievedMemory(BaseModel):
    memory_id: str
    content: str
    timestamp: str
    score: float


class RetrieveResponse(BaseModel):
    memories: list[RetrievedMemory]


class ForgetRequest(_Body):
    memory_id: MemoryId
    metadata: SeedMetadata = Field(default_factory=SeedMetadata)


class ForgetResponse(BaseModel):
    status: str = "deleted"
    memory_id: str


# -- /v1 ----------------------------------------------------------------------------------------


class Scoped(_Body):
    user_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    run_id: ScopeId | None = None

    def ids(self) -> dict[str, Any]:
        return {field: getattr(self, field) for field in SCOPE_FIELDS}


class Message(_Body):
    """One message of a conversation; in a list, a blank one is kept as an episode."""

    content: Text
    role: Text | None = None
    name: Text | None = None
    metadata: JsonObject | None = None
    at: When | None = None
    source: EpisodeSource | None = None


class SoleMessage(Message):
    """A message on its own: it must say something."""

    content: Content


def _says_something(messages: list[Any]) -> list[Any]:
    if not any((item if isinstance(item, str) else item.content).strip() for item in messages):
        raise ValueError("every message is blank: there is nothing to remember")
    return messages


Messages = Annotated[
    list[Text | Message],
    AfterValidator(_says_something),
    Field(
        min_length=1,
        json_schema_extra={
            "contains": {
                "anyOf": [
                    {"type": "string", "pattern": NOT_BLANK},
                    {"type": "object", "properties": {"content": {"type": "string", "pattern": NOT_BLANK}}},
                ]
            },
            "description": "messages (text or message objects); at least one not blank",
        },
    ),
]


class AddRequest(Scoped):
    model_config = ConfigDict(json_schema_extra={"not": {"required": ["expires_at", "expires_in"]}})

    messages: Content | SoleMessage | Messages = Field(
        description="text, a message object, or a list of them (at least one not blank)"
    )
    metadata: JsonObject | None = None
    at: When | None = None
    infer: StrictBool | None = Field(None, description="true needs an LM (else 503 lm_unavailable)")
    background: StrictBool = False
    expires_at: When | None = Field(
        None,
        description="when the messages and every memory made from them are erased: a time in the "
        "future (a past one: 422 invalid_input); not with expires_in",
    )
    expires_in: Interval | None = Field(None, description="expires_at as an interval from now, e.g. 24h")

    @model_validator(mode="after")
    def _one_expiry(self) -> AddRequest:
        if {"expires_at", "expires_in"} <= self.model_fields_set:
            raise ValueError("give expires_at or expires_in, not both")
        return self


class UpdateRequest(Scoped):
    content: Content
    reason: Text | None = None


class FeedbackRequest(Scoped):
    memory_id: MemoryId
    verdict: Verdict
    note: Text | None = None


class SearchRequest(Scoped):
    query: Text
    k: Annotated[int, Field(ge=1, le=MAX_K)] = 10
    recipe: Recipe = Field(
        "hybrid",
        description='"rerank" needs the service\'s reranker: its LM by default (else 503 lm_unavailable)',
    )
    as_of: When | None = None
    known_at: When | None = None
    kinds: list[Kind] | None = None
    filters: FilterMap | None = Field(
        None, description='metadata conditions: {"key": value} or {"key": {"$gte": 3, "$in": [...]}}'
    )
    include_archived: StrictBool = False


class ContextRequest(Scoped):
    query: Text
    budget_tokens: BudgetTokens = 1500
    as_of: When | None = None


class AnswerRequest(Scoped):
    question: Text
    budget_tokens: BudgetTokens = 1500
    as_of: When | None = None
    rewrite: StrictBool = False


class BlockRequest(Scoped):
    value: Text
    char_limit: Annotated[int, Field(ge=1, le=MAX_CHAR_LIMIT)] | None = None
    description: Text | None = None


class MaintainRequest(Scoped):
    consolidate: StrictBool = Field(False, description="true needs an LM (else 503 lm_unavailable)")
    dry_run: StrictBool = False


class RetentionRequest(Scoped):
    """A scope's retention policy, whole (docs/governance.md#retention): what it leaves out is
    not set, so a request with no setting forgets the scope's own policy."""

    erase_after: Interval | None = Field(None, description="erase memories and input this long after written")
    erase_runs_after: Interval | None = Field(
        None, description="the same for what belongs to a run, counted from the run's last message"
    )
    kinds: list[Kind] | None = Field(None, description="the kinds erased (none given: all)")
    pinned: StrictBool = Field(False, description="true: pinned memories are erased too")
    blocks: StrictBool = Field(False, description="true: core blocks (the profile among them) too")


class RetentionPolicy(BaseModel):
    """The retention policy that applies to a scope: its own, else its user's, else its agent's,
    else the service's; intervals in seconds (null: kept until deleted)."""

    erase_after: float | None
    erase_runs_after: float | None
    kinds: list[Kind] | None
    pinned: bool
    blocks: bool


_NAMED_SCOPE: list[Any] = [{"properties": {f: {"type": "string"}}, "required": [f]} for f in SCOPE_FIELDS]


class KeyRequest(Scoped):
    """A key for a scope, or an admin key (which may also be bound to a scope)."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"admin": {"const": True}}, "required": ["admin"]},
                *_NAMED_SCOPE,
            ]
        }
    )

    admin: StrictBool = False
    name: Text | None = None

    @model_validator(mode="after")
    def _bound_or_admin(self) -> KeyRequest:
        if not self.admin and not any(self.ids().values()):
            raise ValueError(
                "a key is bound to a scope (user_id, agent_id, run_id) unless it is an admin key"
            )
        return self


class KeyInfo(BaseModel):
    id: str
    name: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    admin: bool
    created_at: str
    revoked_at: str | None


class CreatedKey(KeyInfo):
    key: str  # shown once; only its hash is stored
