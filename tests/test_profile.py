"""Profile documents: one per scope, patched by an LM, validated against the developer's schema."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from dspy_memory import Memory
from dspy_memory.agent.profile import apply_op
from dspy_memory.embed import HashEmbedder
from dspy_memory.testing import scripted_lm

pytestmark = pytest.mark.backends


class UserProfile(BaseModel):
    name: str | None = None
    home_city: str | None = None
    age: int | None = Field(None, ge=0, le=130)
    pets: list[str] = []
    diet: str | None = None


def patcher(call):
    assert call.output_fields == ["patch"] and "home_city" in call.prompt
    text = " ".join(turn["text"] for turn in call.inputs["turns"])
    ops = []
    if "Denver" in text:
        ops.append(
            {
                "op": "replace" if json.loads(call.inputs["current_profile"]).get("home_city") else "add",
                "path": "/home_city",
                "value": "Denver",
                "reason": "moved",
            }
        )
    if "beagle" in text:
        ops.append({"op": "add", "path": "/pets/-", "value": "Pixel"})
    # Invalid edits a sloppy LM makes: wrong type, out of range, unknown path.
    ops += [
        {"op": "replace", "path": "/age", "value": "thirty"},
        {"op": "add", "path": "/age", "value": 250},
        {"op": "remove", "path": "/favourite_color"},
        {"op": "replace", "path": "no-slash", "value": 1},
    ]
    return {"patch": ops}


def test_profile_is_patched_validated_and_versioned(db_path):
    with Memory(
        db_path, embedder=HashEmbedder(64), lm=scripted_lm(patcher), profile_schema=UserProfile
    ) as memory:
        assert memory.profile(user_id="ada") is None
        memory.profiles.set(UserProfile(name="Ada", home_city="Boston"), memory_scope("ada"))
        update = memory.update_profile(
            [
                {
                    "role": "user",
                    "name": "Ada",
                    "content": "I moved to Denver and adopted a beagle named Pixel.",
                }
            ],
            user_id="ada",
        )
        assert update.applied == [
            {"op": "replace", "path": "/home_city", "value": "Denver"},
            {"op": "add", "path": "/pets/-", "value": "Pixel"},
        ]
        assert [r.reason.split(":")[0] for r in update.rejected] == [
            "invalid at age",
            "invalid at age",
            "remove of '/favourite_color'",
            "replace of 'no-slash'",  # jsonpatch: Location must start with /
        ]
        profile = memory.profile(user_id="ada")
        assert isinstance(profile, UserProfile)
        assert (profile.name, profile.home_city, profile.pets, profile.age) == (
            "Ada",
            "Denver",
            ["Pixel"],
            None,
        )
        versions = memory.blocks.history("_profile", user_id="ada")
        assert [(v.version, v.actor) for v in versions] == [(1, "developer"), (2, "lm")]
        # The messages were logged first, and the run (with its refusals) is in the write log.
        assert memory.store.episodes.list(memory_scope("ada"))[0].content.startswith("I moved to Denver")
        assert memory.stats()["writes"]["ops_rejected"] == 4
        # It appears in context, in its own section, before facts.
        context = memory.context("where does Ada live", user_id="ada", budget_tokens=300)
        assert '## Profile\n- name: Ada\n- home_city: Denver\n- pets: ["Pixel"]' in context.text
        assert "_profile" not in context.text


def test_profile_needs_a_schema_and_an_lm(db_path):
    with Memory(db_path, embedder=HashEmbedder(64)) as memory:
        with pytest.raises(ValueError, match="profile_schema"):
            memory.profiles.set({"name": "Ada"}, memory_scope("ada"))


def test_json_patch_operations():
    doc = {"a": 1, "list": [1, 2]}
    assert apply_op(doc, "add", "/b", 2) == {"a": 1, "b": 2, "list": [1, 2]}
    assert apply_op(doc, "add", "/list/-", 3)["list"] == [1, 2, 3]
    assert apply_op(doc, "add", "/list/0", 0)["list"] == [0, 1, 2]
    assert apply_op(doc, "replace", "/list/1", 9)["list"] == [1, 9]
    assert apply_op(doc, "remove", "/a", None) == {"list": [1, 2]}
    assert doc == {"a": 1, "list": [1, 2]}  # never changed in place
    for op, path in (("replace", "/missing"), ("remove", "/list/5"), ("add", "/x/y"), ("add", "a")):
        with pytest.raises(ValueError):
            apply_op(doc, op, path, 1)


def memory_scope(user):
    from dspy_memory.types import Scope

    return Scope(user_id=user)
