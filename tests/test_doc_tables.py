"""Numbers about optimization and the eval oracles are generated into the docs from committed
JSON (evals/doc_tables.py), never typed: a table that differs from its JSON fails here, and the
oracles' JSON is measured again (it takes seconds)."""

from __future__ import annotations

import re

from evals.doc_tables import BLOCK, documents, oracle_numbers, recorded, render, stale


def test_every_generated_table_in_the_docs_equals_its_json():
    assert stale() == []


def test_the_docs_carry_the_optimization_and_oracle_tables():
    names = {
        match["name"] for path in documents() for match in BLOCK.finditer(path.read_text(encoding="utf-8"))
    }
    assert {"optimize_offline", "eval_oracles"} <= names


def test_a_changed_number_is_caught(tmp_path):
    page = tmp_path / "page.md"
    head = (
        "<!-- generated: eval_oracles from docs/results/eval_oracles.json by python -m evals.doc_tables -->\n"
    )
    body = render("eval_oracles")
    page.write_text(f"{head}{body}<!-- end generated: eval_oracles -->\n", encoding="utf-8")
    assert stale([page]) == []
    changed = re.sub(
        r"op exact (\d)\.(\d)", lambda m: f"op exact {m[1]}.{(int(m[2]) + 1) % 10}", body, count=1
    )
    assert changed != body
    page.write_text(f"{head}{changed}<!-- end generated: eval_oracles -->\n", encoding="utf-8")
    assert stale([page]) and "page.md: eval_oracles" in stale([page])[0]


def test_the_eval_oracles_measure_what_the_docs_say():
    """The rule-based reconcile oracle and the temporal oracle writer, run again (the LoCoMo
    slice too where the LoCoMo file is on this machine; it is not in the repository)."""
    again, kept = oracle_numbers(), recorded("eval_oracles")
    if "reconcile_locomo" not in again:
        kept.pop("reconcile_locomo", None)
    assert again == kept


def test_no_number_in_prose_next_to_the_optimization_tables_escapes_its_json():
    """The sections around the generated tables state no score of their own: every figure a
    reader sees there is inside a generated block."""
    for path in documents():
        text = path.read_text(encoding="utf-8")
        outside = BLOCK.sub("", text)
        for section in re.split(r"\n(?=#+ )", outside):
            if "optimize_offline" not in section and "learner LM" not in section:
                continue
            scores = re.findall(r"\b\d{1,3}\.\d\s*->\s*\d{1,3}\.\d\b", section)
            assert not scores, (path.name, scores)
