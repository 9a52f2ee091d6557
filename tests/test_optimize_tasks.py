"""The other optimization targets: their examples, metrics, and a compile that helps."""

from __future__ import annotations

import json
import re

import dspy

from dspy_memory import Memory
from dspy_memory.embed import HashEmbedder
from dspy_memory.programs import QueryRewriter
from dspy_memory.testing import scripted_lm
from evals.optimize import evaluate, run
from evals.tasks import get_task, shuffle_split

from .test_extraction_eval import OBSERVED
from .test_locomo import MINI


def test_extract_and_answer_examples_and_metrics(tmp_path):
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(OBSERVED))
    extract = get_task("extract", embedder="test:256")
    examples = extract.examples(str(path), "test:256")
    assert len(examples) == 2 and examples[0].reference
    perfect = dspy.Prediction(facts=[type("F", (), {"content": text}) for text in examples[0].reference])
    assert extract.metric(examples[0], perfect) == 1.0
    assert "Matched 0 of" in extract.feedback(examples[0], dspy.Prediction(facts=[])).feedback

    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    answer = get_task("answer")
    questions = answer.examples(str(path), "test:64")
    assert len(questions) == 4 and all(q.context for q in questions)
    researching = next(q for q in questions if "researching" in q.question)
    assert "adoption agencies" in researching.context.lower()
    assert answer.metric(researching, dspy.Prediction(answer="Adoption agencies")) == 1.0


def test_query_planning_learns_dates_from_demonstrations(tmp_path):
    """A student that only plans an as_of date once it has seen demos with dates improves."""
    task = get_task("query")
    examples = task.examples(task.default_data, None)
    assert len(examples) == 24 and sum(1 for e in examples if e.gold_as_of) == 8
    gold = {e.question: e.gold_as_of for e in examples}

    def teacher(call):
        return {"plan": {"queries": [call.inputs["question"]], "as_of": gold[call.inputs["question"]]}}

    months = {
        m: i
        for i, m in enumerate(
            [
                "January",
                "February",
                "March",
                "April",
                "May",
                "June",
                "July",
                "August",
                "September",
                "October",
                "November",
                "December",
            ],
            start=1,
        )
    }

    def student(call):
        question = call.inputs["question"]
        as_of = None
        if '"as_of": "20' in call.prompt:  # a demonstration showed a planned date
            match = re.search(r"(?:in |early |spring )?(" + "|".join(months) + r")?\s*(\d{4})", question)
            if match and match.group(2) and not question.startswith(("When", "Where does", "What is", "Is ")):
                month = months.get(match.group(1) or "", 6)
                as_of = f"{match.group(2)}-{month:02d}-15"
        return {"plan": {"queries": [question], "as_of": as_of}}

    train, dev = shuffle_split(examples, dev_share=0.5, seed=1)
    train.sort(key=lambda e: e.gold_as_of is None)  # demos with dates first
    result = run(
        "query",
        "bootstrap",
        train,
        dev,
        lm=scripted_lm(student),
        teacher_lm=scripted_lm(teacher),
        out=tmp_path / "query.json",
    )
    assert result["after"] > result["before"]
    reloaded = QueryRewriter()
    reloaded.load(str(tmp_path / "query.json"))
    assert evaluate(reloaded, dev, scripted_lm(student), metric=task.metric) == result["after"]
    with Memory(tmp_path / "m.db", embedder=HashEmbedder(32), programs=tmp_path) as memory:
        assert memory.programs_in_use == {"query": str(tmp_path / "query.json")}
