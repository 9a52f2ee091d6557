"""A reconcile slice from real LoCoMo dialogue: facts that change, repeat or sharpen across sessions.

    python -m evals.reconcile_locomo [--data PATH]

evals/data/reconcile_locomo.json holds our labels, made by hand from the LoCoMo development
split. LoCoMo is CC BY-NC 4.0, so none of its text is in this repository: each label names the
conversation (`sample_id`), the `session` and the `dia_ids` of the turns that carry the new
information, and adds only our own writing — the existing memories as earlier sessions
established them (with the earlier `source_dia_ids` they summarize), the new facts, the expected
operations, a category and a one-line `why`. `load_locomo_cases` reads the turns' text from a
LoCoMo file at load time and returns cases in the shape of evals/data/reconcile.jsonl, so
`evals.reconcile.as_examples` and `run` take them as they are.

Splits are by conversation, never by case (conv-26 and conv-30 train, conv-41 dev, conv-42 and
conv-43 test), so a dev or test score is on people and wording the optimizer never saw.
Categories are the reconcile set's, plus `plan_outcome` (a plan that happened: the event is an
ADD and the plan, another relation that was true when said, stays), which no template covers.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from evals.locomo import DEFAULT_DATA, Conversation, load_locomo, normalize_dia_ids
from evals.report import table

LABELS = Path(__file__).resolve().parent / "data" / "reconcile_locomo.json"
SPLIT_BY_CONVERSATION = {
    "conv-26": "train",
    "conv-30": "train",
    "conv-41": "dev",
    "conv-42": "test",
    "conv-43": "test",
}
EXTRA_CATEGORIES = ("plan_outcome",)
_MEMORY_FIELDS = ("alias", "content", "subject", "predicate", "valid_at")


def load_labels(path: str | Path = LABELS) -> list[dict[str, Any]]:
    """The hand-made labels, as stored (references and our annotations, no LoCoMo text)."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def load_locomo_cases(
    locomo_path: str | Path = DEFAULT_DATA, *, labels_path: str | Path = LABELS
) -> list[dict[str, Any]]:
    """The slice as reconcile cases, with each turn's text (and a shared photo's caption) read
    from the LoCoMo file. Raises ValueError naming the file and what is missing when the file
    does not hold a labelled conversation, session or turn."""
    conversations = {c.sample_id: c for c in load_locomo(locomo_path)}
    cases = []
    for label in load_labels(labels_path):
        sample_id = label["sample_id"]
        conversation = conversations.get(sample_id)
        if conversation is None:
            raise ValueError(
                f"{locomo_path} has no conversation {sample_id!r}, which case {label['id']} needs; "
                "the labels were made on the LoCoMo development split (or the full locomo10.json)"
            )
        split = SPLIT_BY_CONVERSATION.get(sample_id)
        if split is None:
            raise ValueError(
                f"case {label['id']}: conversation {sample_id!r} has no split in SPLIT_BY_CONVERSATION"
            )
        cases.append(_case(label, conversation, locomo_path, split))
    return cases


def _case(
    label: dict[str, Any], conversation: Conversation, locomo_path: str | Path, split: str
) -> dict[str, Any]:
    session = next((s for s in conversation.sessions if s.index == label["session"]), None)
    if session is None:
        raise ValueError(
            f"{locomo_path}: conversation {conversation.sample_id} has no session {label['session']} "
            f"(case {label['id']})"
        )
    positions = {turn.dia_id: index for index, turn in enumerate(session.turns)}
    turns = []
    for dia_id in label["dia_ids"]:
        wanted = normalize_dia_ids(dia_id)
        index = positions.get(wanted[0]) if wanted else None
        if index is None:
            raise ValueError(
                f"{locomo_path}: conversation {conversation.sample_id}, session {session.index} has no "
                f"turn {dia_id} (case {label['id']}); is this the LoCoMo release the labels were made on?"
            )
        turn = session.turns[index]
        # LoCoMo dates a session, not its turns: turns get a minute each, in order, from its start.
        said = session.date_time + timedelta(minutes=index)
        turns.append({"speaker": turn.speaker, "text": turn.content(), "time": f"{said:%Y-%m-%d %H:%M}"})
    case = {
        "id": f"locomo/{label['id']}",
        "family": f"locomo/{conversation.sample_id}",
        "split": split,
        "category": label["category"],
        "observed_at": f"{session.date_time:%Y-%m-%d (%A)}",
        "turns": turns,
        "existing_memories": [
            {key: memory[key] for key in _MEMORY_FIELDS} for memory in label["existing_memories"]
        ],
        "new_facts": label["new_facts"],
        "expected_ops": label["expected_ops"],
    }
    if "expected_valid_at" in label:
        case["expected_valid_at"] = label["expected_valid_at"]
    return case


def counts(cases: list[dict[str, Any]]) -> list[list[Any]]:
    """Rows of category, cases per split and in all (a last row for every category)."""
    splits = ("train", "dev", "test")
    by = Counter((case["category"], case["split"]) for case in cases)
    rows = [
        [category, *(by[category, split] for split in splits), sum(by[category, split] for split in splits)]
        for category in sorted({case["category"] for case in cases})
    ]
    totals = [sum(by[key] for key in by if key[1] == split) for split in splits]
    return [*rows, ["all", *totals, len(cases)]]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="a LoCoMo file (default: data/locomo10.json, from python -m evals.locomo download)",
    )
    parser.add_argument("--labels", default=str(LABELS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = load_locomo_cases(args.data, labels_path=args.labels)
    conversations = Counter(case["family"] for case in cases)
    print(f"Reconcile slice from LoCoMo: {len(cases)} cases, {len(conversations)} conversations\n")
    print(table(["category", "train", "dev", "test", "all"], counts(cases)))
    print(
        "\n"
        + table(
            ["conversation", "split", "cases"],
            [
                [family, SPLIT_BY_CONVERSATION[family.split("/", 1)[1]], n]
                for family, n in sorted(conversations.items())
            ],
        )
    )
    return cases


if __name__ == "__main__":
    main()
