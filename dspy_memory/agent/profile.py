"""Profiles: ONE document per scope, shaped by a pydantic model the developer defines, kept up
to date by JSON-patch edits from an LM (`UpdateProfile`). Every edit is validated against the
schema; edits that do not apply or would make the document invalid are refused and recorded.
The document is stored as a versioned core block (label `_profile`) and shown in context."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from dspy_memory.errors import BlockError
from dspy_memory.ops import Rejection
from dspy_memory.store import Store
from dspy_memory.types import PROFILE_LABEL, Episode, LMUsage, Scope
from dspy_memory.util.lm import lm_name, run_program, short_error
from dspy_memory.util.timeutil import now_db

PROFILE_CHARS = 20_000


class ProfileUpdate(BaseModel):
    """What one `update_profile` call changed, refused and cost."""

    profile: dict[str, Any] | None
    applied: list[dict[str, Any]] = []
    rejected: list[Rejection] = []
    usage: LMUsage = LMUsage()
    error: str | None = None


def apply_op(document: dict[str, Any], op: str, path: str, value: Any = None) -> dict[str, Any]:
    """One RFC 6902 add/replace/remove (by jsonpatch) on a copy of `document`; raises ValueError,
    with jsonpatch's reason, if it cannot apply."""
    import jsonpatch  # profiles are optional: the CLI starts without it
    import jsonpointer

    if op not in ("add", "replace", "remove"):
        raise ValueError(f"operation {op!r} is not add, replace or remove")
    step = {"op": op, "path": path} if op == "remove" else {"op": op, "path": path, "value": value}
    try:
        return jsonpatch.apply_patch(document, [step])
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise ValueError(f"{op} of {path!r}: {exc}") from None


class Profiles:
    """`memory.profiles`: read, set and update the profile document of a scope."""

    def __init__(self, store: Store, schema: type[BaseModel] | None) -> None:
        self._store = store
        self.schema = schema

    def _schema(self) -> type[BaseModel]:
        if self.schema is None:
            raise ValueError(
                "no profile schema: Memory(path, profile_schema=MyProfile) with a pydantic model"
            )
        return self.schema

    def get(self, scope: Scope) -> BaseModel | None:
        block = self._store.blocks.get(PROFILE_LABEL, scope)
        if block is None:
            return None
        return self._schema().model_validate_json(block.value)

    def set(
        self,
        profile: BaseModel | dict[str, Any],
        scope: Scope,
        *,
        actor: str = "developer",
        reason: str | None = None,
    ) -> BaseModel:
        model = self._schema()
        validated = profile if isinstance(profile, model) else model.model_validate(profile)
        text = validated.model_dump_json()
        try:
            self._store.blocks.write(
                PROFILE_LABEL,
                scope,
                value=text,
                char_limit=PROFILE_CHARS,
                description="profile document (JSON)",
                actor=actor,
                reason=reason,
                enforce_read_only=False,
            )
        except BlockError as exc:
            raise ValueError(f"the profile is too large to store: {exc}") from None
        return validated

    def update_from(
        self, episodes: Sequence[Episode] | None, scope: Scope, *, lm: Any, recent: int
    ) -> ProfileUpdate:
        """`update` from these episodes, or from the scope's `recent` latest ones."""
        if episodes is None:
            episodes = self._store.episodes.list(scope, limit=recent, newest_first=True)[::-1]
        return self.update(episodes, scope, lm=lm)

    def update(
        self,
        episodes: Sequence[Episode],
        scope: Scope,
        *,
        lm: Any,
        program: Any = None,
        max_attempts: int = 2,
    ) -> ProfileUpdate:
        """Ask the LM for JSON-patch edits from these episodes; apply those that keep the
        document valid; record the others."""
        from dspy_memory.programs.profile import ProfileUpdater
        from dspy_memory.programs.write import Turn

        model = self._schema()
        started = now_db()
        current = self.get(scope)
        document = current.model_dump(mode="json") if current is not None else {}
        spoken = [episode for episode in episodes if episode.content.strip()]
        if not spoken:
            return ProfileUpdate(profile=document or None)
        inputs = {
            "profile_schema": json.dumps(model.model_json_schema()),
            "current_profile": json.dumps(document),
            "turns": [Turn.of(episode) for episode in spoken],
            "observed_at": f"{max(e.occurred_at for e in spoken):%Y-%m-%d (%A)}",
        }
        try:
            prediction, usage = run_program(
                program or ProfileUpdater(), lm, inputs, max_attempts=max_attempts
            )
        except Exception as exc:
            error = short_error(exc)
            self._log(scope, spoken, lm, getattr(exc, "usage", None) or LMUsage(), 0, [], error, started)
            return ProfileUpdate(
                profile=document or None, error=error, usage=getattr(exc, "usage", None) or LMUsage()
            )
        applied, rejected = [], []
        for index, patch in enumerate(prediction.patch or []):
            try:
                candidate = apply_op(document, patch.op, patch.path, patch.value)
                model.model_validate(candidate)
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = "/".join(str(part) for part in problem.get("loc", ()))
                rejected.append(
                    Rejection(
                        index=index,
                        action=patch.op,
                        reason=f"invalid at {where or 'the root'}: {problem['msg']}",
                    )
                )
                continue
            except ValueError as exc:
                rejected.append(Rejection(index=index, action=patch.op, reason=str(exc)))
                continue
            document = candidate
            applied.append({"op": patch.op, "path": patch.path, "value": patch.value})
        if applied:
            self.set(
                document,
                scope,
                actor="lm",
                reason="; ".join(filter(None, (p.reason for p in prediction.patch or []))) or None,
            )
        self._log(scope, spoken, lm, usage, len(applied), rejected, None, started)
        return ProfileUpdate(profile=document or None, applied=applied, rejected=rejected, usage=usage)

    def _log(
        self,
        scope: Scope,
        episodes: Sequence[Episode],
        lm: Any,
        usage: LMUsage,
        applied: int,
        rejected: list[Rejection],
        error: str | None,
        started: str,
    ) -> None:
        self._store.runs.log(
            scope,
            mode="profile",
            episode_ids=[episode.id for episode in episodes],
            lm=lm_name(lm),
            usage=usage,
            ops_applied=applied,
            rejected=rejected,
            error=error,
            started_at=started,
        )
