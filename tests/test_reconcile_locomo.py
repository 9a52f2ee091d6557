"""The LoCoMo reconcile slice: its labels are consistent and quote no dialogue, and (when the
LoCoMo file is here) every case loads with its turns and fits the write programs' inputs."""

import json
import re
from datetime import date
from pathlib import Path

import pytest

from dspy_memory.ops import Fact, FactKind
from dspy_memory.programs import KnownMemory
from dspy_memory.util.text import normalize_name, normalize_predicate
from evals.data.reconcile_set import CATEGORIES
from evals.locomo import DEFAULT_DATA, load_locomo
from evals.reconcile import as_examples
from evals.reconcile_locomo import (
    EXTRA_CATEGORIES,
    SPLIT_BY_CONVERSATION,
    load_labels,
    load_locomo_cases,
    main,
)

LABELS = load_labels()
HAVE_LOCOMO = Path(DEFAULT_DATA).exists()
needs_locomo = pytest.mark.skipif(not HAVE_LOCOMO, reason="LoCoMo development split not present")
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_ACTIONS = {"ADD", "UPDATE", "INVALIDATE", "DELETE", "NOOP"}
_FACT_KINDS = FactKind.__args__  # Fact() quietly turns an unknown kind into "fact"
# The longest run of a dialogue turn's words our own writing may repeat (names and set phrases
# recur; a sentence copied from the dialogue does not fit under this).
_MAX_SHARED_WORDS = 7


def _position(dia_id: str) -> tuple[int, int]:
    session, turn = _DIA_ID.match(dia_id).groups()
    return int(session), int(turn)


def _date_or_none(value):
    return value is None or date.fromisoformat(value).isoformat() == value


def test_the_slice_is_big_and_varied_enough():
    assert len(LABELS) >= 45
    assert {label["sample_id"] for label in LABELS} == set(SPLIT_BY_CONVERSATION)
    assert len({label["category"] for label in LABELS}) >= 5
    assert len({label["id"] for label in LABELS}) == len(LABELS)
    actions = {op["action"] for label in LABELS for op in label["expected_ops"]}
    assert {"ADD", "NOOP", "UPDATE", "INVALIDATE"} <= actions


@pytest.mark.parametrize("label", LABELS, ids=[label["id"] for label in LABELS])
def test_label_is_consistent(label):
    assert label["id"].startswith(label["sample_id"] + "/")
    assert label["category"] in (*CATEGORIES, *EXTRA_CATEGORIES)
    assert label["why"].strip() and "\n" not in label["why"]
    assert label["dia_ids"] and all(_position(d)[0] == label["session"] for d in label["dia_ids"])
    first_new = min(_position(d) for d in label["dia_ids"])
    memories = label["existing_memories"]
    assert 2 <= len(memories) <= 6
    assert [m["alias"] for m in memories] == list(range(1, len(memories) + 1))
    for memory in memories:
        KnownMemory(**{k: v for k, v in memory.items() if k != "source_dia_ids"})
        assert _date_or_none(memory["valid_at"])
        # A memory summarizes what was said before the new turns.
        assert memory["source_dia_ids"] and all(_position(d) < first_new for d in memory["source_dia_ids"])
    facts, ops = label["new_facts"], label["expected_ops"]
    assert len(ops) == len(facts) >= 1  # one operation per new fact, in order
    targets = [op.get("target") for op in ops if op.get("target") is not None]
    assert len(targets) == len(set(targets))  # each memory acted on at most once
    for fact, op in zip(facts, ops):
        Fact(**fact)
        assert fact["kind"] in _FACT_KINDS and _date_or_none(fact["valid_at"])
        assert op["action"] in _ACTIONS
        if op["action"] == "ADD":
            assert "target" not in op
            continue
        target = memories[op["target"] - 1]
        assert op["target"] == target["alias"]
        assert ("correction" in op) == (op["action"] == "INVALIDATE")
        # The write path refuses an UPDATE or NOOP (and turns an INVALIDATE into an ADD) that
        # names another subject or relation than its target (dspy_memory/write/validate.py), so a label
        # must keep them equal.
        assert normalize_name(fact["subject"]) == normalize_name(target["subject"])
        assert normalize_predicate(fact["predicate"]) == normalize_predicate(target["predicate"])
    if "expected_valid_at" in label:
        assert len(facts) == 1 and facts[0]["valid_at"] == label["expected_valid_at"]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_the_shingle_check_catches_a_copied_sentence():
    turn = "I just signed up for a pottery class yesterday and it is like therapy for me"
    copied = "Melanie said she just signed up for a pottery class yesterday, as therapy."
    ours = "Melanie signed up for a pottery class on 2023-07-02."
    n = _MAX_SHARED_WORDS + 1
    assert _shingles(copied, n) & _shingles(turn, n)
    assert not _shingles(ours, n) & _shingles(turn, n)


@needs_locomo
def test_no_annotation_quotes_the_dialogue():
    n = _MAX_SHARED_WORDS + 1
    dialogue = {
        c.sample_id: set().union(*(_shingles(t.content(), n) for t in c.turns))
        for c in load_locomo(DEFAULT_DATA)
    }
    quoted = []
    for label in LABELS:
        ours = [label["why"], *(m["content"] for m in label["existing_memories"])]
        ours += [text for f in label["new_facts"] for text in (f["content"], f["object"] or "")]
        for text in ours:
            shared = _shingles(text, n) & dialogue[label["sample_id"]]
            if shared:
                quoted.append((label["id"], " ".join(sorted(shared)[0])))
    assert not quoted


@needs_locomo
def test_every_case_loads_with_its_turns():
    cases = load_locomo_cases(DEFAULT_DATA)
    assert len(cases) == len(LABELS)
    turns = {c.sample_id: {t.dia_id: t for t in c.turns} for c in load_locomo(DEFAULT_DATA)}
    for label, case in zip(LABELS, cases):
        assert case["id"] == f"locomo/{label['id']}"
        source = [turns[label["sample_id"]][d] for d in label["dia_ids"]]
        assert [t["text"] for t in case["turns"]] == [t.content() for t in source]
        assert [t["speaker"] for t in case["turns"]] == [t.speaker for t in source]
        assert [t["time"] for t in case["turns"]] == sorted(t["time"] for t in case["turns"])
        assert case["turns"][0]["time"].startswith(case["observed_at"][:10])
        assert all("source_dia_ids" not in m for m in case["existing_memories"])
        assert set(case) >= {
            "category",
            "observed_at",
            "turns",
            "existing_memories",
            "new_facts",
            "expected_ops",
        }


@needs_locomo
def test_splits_are_by_conversation():
    cases = load_locomo_cases(DEFAULT_DATA)
    split_of = {}
    for case in cases:
        assert split_of.setdefault(case["family"], case["split"]) == case["split"]
    assert split_of == {f"locomo/{sample}": split for sample, split in SPLIT_BY_CONVERSATION.items()}
    assert {case["split"] for case in cases} == {"train", "dev", "test"}


@needs_locomo
def test_the_cases_fit_both_write_programs():
    cases = load_locomo_cases(DEFAULT_DATA)
    for program, inputs in (
        ("reconcile", {"new_facts", "existing_memories", "observed_at"}),
        ("write", {"turns", "observed_at", "existing_memories", "context"}),
    ):
        examples = as_examples(cases, program)
        assert len(examples) == len(cases)
        assert all(set(e.inputs().keys()) == inputs and e.ops for e in examples)


@needs_locomo
def test_cli_prints_counts_per_category_and_split(capsys):
    main(["--data", str(DEFAULT_DATA)])
    out = capsys.readouterr().out
    assert f"{len(LABELS)} cases, 5 conversations" in out
    assert "| plan_outcome" in out and "| locomo/conv-41 | dev" in out


# The loader on a file of our own making (no LoCoMo text): shape, captions, and clear failures.
_FAKE = [
    {
        "sample_id": "conv-26",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:00 am on 4 March, 2024",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "My cat is called Pip."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice!"},
            ],
            "session_2_date_time": "6:30 pm on 9 March, 2024",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "Hi."},
                {
                    "speaker": "Ana",
                    "dia_id": "D2:2",
                    "text": "Pip has a sister now.",
                    "blip_caption": "two cats",
                },
            ],
        },
    }
]
_FAKE_LABEL = {
    "id": "conv-26/second-cat",
    "sample_id": "conv-26",
    "session": 2,
    "dia_ids": ["D2:2"],
    "existing_memories": [
        {
            "alias": 1,
            "content": "Ana has a cat, Pip.",
            "subject": "Ana",
            "predicate": "has_pet",
            "valid_at": "2024-03-04",
            "source_dia_ids": ["D1:1"],
        },
    ],
    "new_facts": [
        {
            "content": "Ana has a second cat.",
            "subject": "Ana",
            "predicate": "has_pet",
            "object": None,
            "valid_at": "2024-03-09",
            "kind": "profile",
        },
    ],
    "expected_ops": [{"action": "ADD"}],
    "category": "unrelated",
    "why": "A second pet.",
}


def _write(tmp_path, locomo, labels):
    locomo_path, labels_path = tmp_path / "locomo.json", tmp_path / "labels.json"
    locomo_path.write_text(json.dumps(locomo))
    labels_path.write_text(json.dumps(labels))
    return locomo_path, labels_path


def test_loader_builds_reconcile_cases_from_the_file(tmp_path):
    locomo_path, labels_path = _write(tmp_path, _FAKE, [_FAKE_LABEL])
    [case] = load_locomo_cases(locomo_path, labels_path=labels_path)
    assert case == {
        "id": "locomo/conv-26/second-cat",
        "family": "locomo/conv-26",
        "split": "train",
        "category": "unrelated",
        "observed_at": "2024-03-09 (Saturday)",
        "turns": [
            {
                "speaker": "Ana",
                "text": "Pip has a sister now. [shared a photo: two cats]",
                "time": "2024-03-09 18:31",
            }
        ],
        "existing_memories": [
            {
                "alias": 1,
                "content": "Ana has a cat, Pip.",
                "subject": "Ana",
                "predicate": "has_pet",
                "valid_at": "2024-03-04",
            }
        ],
        "new_facts": _FAKE_LABEL["new_facts"],
        "expected_ops": [{"action": "ADD"}],
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dia_ids": ["D2:7"]}, "has no turn D2:7"),
        ({"session": 5, "dia_ids": ["D5:1"]}, "has no session 5"),
        ({"sample_id": "conv-99", "id": "conv-99/x"}, "has no conversation 'conv-99'"),
    ],
)
def test_a_file_that_does_not_match_is_named(tmp_path, change, message):
    locomo_path, labels_path = _write(tmp_path, _FAKE, [{**_FAKE_LABEL, **change}])
    with pytest.raises(ValueError, match=message) as raised:
        load_locomo_cases(locomo_path, labels_path=labels_path)
    assert str(locomo_path) in str(raised.value)


@needs_locomo
def test_the_reconcile_runner_scores_the_slice(tmp_path):
    from evals.reconcile import main

    results = main(
        [
            "--locomo",
            str(DEFAULT_DATA),
            "--split",
            "test",
            "--out",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "r.png"),
        ]
    )
    expected = [case for case in load_locomo_cases(DEFAULT_DATA) if case["split"] == "test"]
    assert results["summary"]["overall"]["cases"] == len(expected) == results["lm_calls"]
    assert "cases of the LoCoMo slice" in (tmp_path / "r.md").read_text()
