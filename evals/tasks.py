"""What `evals.optimize` can compile: each memory program with its examples and metric."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspy_memory.learn.metric import ops_feedback, ops_metric
from evals.metrics import locomo_f1, match_facts


@dataclass(frozen=True)
class Task:
    name: str
    file: str  # the file `Memory(programs=...)` loads it from
    make_program: Callable[[], Any]
    metric: Callable[..., float]
    feedback: Callable[..., Any]  # GEPA's metric: score and text
    examples: Callable[[str, Any], list[Any]]  # (data path, embedder) -> examples
    default_data: str


def _prediction(score: float, feedback: str) -> Any:
    import dspy

    return dspy.Prediction(score=score, feedback=feedback)


# -- reconcile and write: the reconcile set ---------------------------------------------------


def _reconcile_examples(program: str) -> Callable[[str, Any], list[Any]]:
    def load(path: str, embedder: Any) -> list[Any]:
        from evals.reconcile import as_examples, load_cases

        return as_examples(load_cases(path), program)

    return load


# -- extract: LoCoMo observations --------------------------------------------------------------


def extract_examples(path: str, embedder: Any) -> list[Any]:
    import dspy

    from dspy_memory.programs import Turn
    from evals.extraction import extraction_cases
    from evals.locomo import load_locomo, select_split

    return [
        dspy.Example(
            turns=[Turn(**turn) for turn in case["turns"]],
            observed_at=case["observed_at"],
            context=case["context"],
            reference=case["reference"],
            facts=[{"content": text} for text in case["reference"]],
            case_id=case["id"],
            group=case["id"].split("/")[0],
        ).with_inputs("turns", "observed_at", "context")
        for case in extraction_cases(select_split(load_locomo(path)))
    ]


def fact_metrics(embedder: Any) -> tuple[Callable[..., float], Callable[..., Any]]:
    """The extraction metric and its GEPA feedback, matching facts with `embedder` (built on
    first use: loading the model is not free)."""
    model: dict[str, Any] = {}

    def embed(texts: list[str]) -> Any:
        if "embedder" not in model:
            from dspy_memory.embed import make_embedder

            model["embedder"] = make_embedder(embedder)
        return model["embedder"].embed(texts)

    def metric(example: Any, prediction: Any, trace: Any = None) -> float:
        facts = [fact.content for fact in (prediction.facts or [])]
        return match_facts(facts, example.reference, embed)["f1"]

    def feedback(
        gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
    ) -> Any:
        facts = [fact.content for fact in (pred.facts or [])]
        result = match_facts(facts, gold.reference, embed)
        matched = {j for _, j, _ in result["matches"]}
        missed = [fact for j, fact in enumerate(gold.reference) if j not in matched][:3]
        return _prediction(
            result["f1"],
            f"Matched {len(matched)} of {len(gold.reference)} reference facts with {len(facts)} extracted. "
            + (f"Missed, for example: {missed}." if missed else ""),
        )

    return metric, feedback


# -- answer: LoCoMo QA with contexts from memory ----------------------------------------------


def answer_examples(path: str, embedder: Any) -> list[Any]:
    """Questions of categories 1-4 with the context `memory.context` builds for them (raw turns)."""
    import dspy

    from dspy_memory import Memory
    from evals.locomo import load_locomo, select_split
    from evals.locomo_retrieval import index_conversation

    examples = []
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "answer.db", embedder=embedder) as memory:
        for conversation in select_split(load_locomo(path)):
            index_conversation(memory, conversation)
            today = f"{conversation.sessions[-1].date_time:%Y-%m-%d}" if conversation.sessions else ""
            for question in conversation.questions:
                if question.category not in (1, 2, 3, 4):
                    continue
                context = memory.context(
                    question.question, user_id=conversation.sample_id, budget_tokens=1000
                )
                examples.append(
                    dspy.Example(
                        question=question.question,
                        context=context.text,
                        today=today,
                        answer=question.answer,
                        category=question.category,
                        group=conversation.sample_id,
                    ).with_inputs("question", "context", "today")
                )
    return examples


def answer_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    return locomo_f1(str(prediction.answer or ""), example.answer, example.category)


def answer_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    score = answer_metric(gold, pred)
    return _prediction(
        score, f"The expected answer was '{gold.answer}'; the answer was '{pred.answer}' (F1 {score:.2f})."
    )


# -- query: the temporal scenarios -------------------------------------------------------------


def query_examples(path: str, embedder: Any) -> list[Any]:
    """One example per question; the label plan searches for the question itself and has the
    annotated date (the metric reads only the date and that there is a query)."""
    import dspy

    from evals.temporal import load_scenarios

    examples = []
    for scenario in load_scenarios(path):
        today = scenario["sessions"][-1]["at"][:10]
        for item in scenario["questions"]:
            examples.append(
                dspy.Example(
                    question=item["question"],
                    today=today,
                    gold_as_of=item.get("as_of"),
                    plan={"queries": [item["question"]], "as_of": item.get("as_of")},
                    group=scenario["id"],
                ).with_inputs("question", "today")
            )
    return examples


def query_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """1 when the plan asks about the right time: a past date within a month, or now. Its queries
    are not scored: the read path searches the question itself next to them (read/answer.py),
    so a plan without queries searches the question."""
    from dspy_memory.util.timeutil import lm_date, to_datetime

    planned = lm_date(prediction.plan.as_of)
    if example.gold_as_of is None:
        return 1.0 if planned is None else 0.0
    if planned is None:
        return 0.0
    return 1.0 if abs((to_datetime(planned) - to_datetime(example.gold_as_of)).days) <= 31 else 0.0


def query_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    score = query_metric(gold, pred)
    want = f"as_of near {gold.gold_as_of}" if gold.gold_as_of else "no as_of (the question is about now)"
    return _prediction(
        score, "Correct." if score else f"Expected {want}; the plan had as_of={pred.plan.as_of!r}."
    )


# -- consolidate: the consolidation set -------------------------------------------------------


def _decisions(prediction: Any) -> list[Any]:
    return list(getattr(prediction, "decisions", None) or [])


def consolidate_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    from evals.consolidate import consolidation_score

    return consolidation_score(example.expected, _decisions(prediction))["exact"]


def consolidate_feedback(
    gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None
) -> Any:
    """What was wrong, as reconcile's feedback says it: the right decisions by action and
    aliases. Content is judged, never quoted: a lost term is counted, not named."""
    from evals.consolidate import consolidation_score

    decisions = _decisions(pred)
    score = consolidation_score(gold.expected, decisions)
    if score["exact"] == 1.0:
        return _prediction(1.0, "Correct.")

    def show(items: list[Any]) -> str:
        shown = []
        for item in items:
            item = item.model_dump() if hasattr(item, "model_dump") else dict(item)
            shown.append(f"{item.get('action')} {'+'.join(map(str, item.get('aliases') or []))}".strip())
        return ", ".join(shown)

    if score["partition"]:
        lost = len(score["missing"])
        return _prediction(
            0.0,
            f"The groups and actions were right, but the new content lost {lost} name(s), number(s) or "
            "date(s) that the memories it replaces hold. Keep every one of them in the new sentence.",
        )
    return _prediction(
        0.0,
        f"In a '{gold.category}' cluster the right decisions were [{show(gold.expected)}] but the answer "
        f"was [{show(decisions) or 'nothing'}]{'' if score['valid'] else ' (unknown or repeated aliases)'}. "
        "Review the rules for this kind of cluster.",
    )


def consolidate_examples(path: str, embedder: Any) -> list[Any]:
    from evals.consolidate import as_examples, load_cases

    return as_examples(load_cases(path))


def _tasks(embedder: Any) -> dict[str, Task]:
    from dspy_memory.programs import (
        CompactWriter,
        FactExtractor,
        FactReconciler,
        FusedWriter,
        MemoryAnswerer,
        MemoryConsolidator,
        MemoryReranker,
        QueryRewriter,
    )
    from evals.consolidate import DATA as CONSOLIDATE
    from evals.locomo import DEFAULT_DATA
    from evals.reconcile import DATA as RECONCILE
    from evals.rerank import rerank_examples, rerank_feedback, rerank_metric
    from evals.temporal import DATA as TEMPORAL

    facts_metric, facts_feedback = fact_metrics(embedder)
    return {
        "reconcile": Task(
            "reconcile",
            "reconcile.json",
            FactReconciler,
            ops_metric,
            ops_feedback,
            _reconcile_examples("reconcile"),
            str(RECONCILE),
        ),
        "write": Task(
            "write",
            "write.json",
            FusedWriter,
            ops_metric,
            ops_feedback,
            _reconcile_examples("write"),
            str(RECONCILE),
        ),
        "write_compact": Task(
            "write_compact",
            "write_compact.json",
            CompactWriter,
            ops_metric,
            ops_feedback,
            _reconcile_examples("write"),
            str(RECONCILE),
        ),
        "extract": Task(
            "extract",
            "extract.json",
            FactExtractor,
            facts_metric,
            facts_feedback,
            extract_examples,
            str(DEFAULT_DATA),
        ),
        "answer": Task(
            "answer",
            "answer.json",
            MemoryAnswerer,
            answer_metric,
            answer_feedback,
            answer_examples,
            str(DEFAULT_DATA),
        ),
        "query": Task(
            "query", "query.json", QueryRewriter, query_metric, query_feedback, query_examples, str(TEMPORAL)
        ),
        "consolidate": Task(
            "consolidate",
            "consolidate.json",
            MemoryConsolidator,
            consolidate_metric,
            consolidate_feedback,
            consolidate_examples,
            str(CONSOLIDATE),
        ),
        "rerank": Task(
            "rerank",
            "rerank.json",
            MemoryReranker,
            rerank_metric,
            rerank_feedback,
            rerank_examples,
            str(DEFAULT_DATA),
        ),
    }


TASK_NAMES = ("answer", "consolidate", "extract", "query", "reconcile", "rerank", "write", "write_compact")


def get_task(name: str, *, embedder: Any = "local") -> Task:
    """The task `name`; `embedder` matches facts (extract) and builds contexts (answer) and
    candidates (rerank)."""
    tasks = _tasks(embedder)
    if name not in tasks:
        raise ValueError(f"unknown program {name!r}; choose from {sorted(tasks)}")
    return tasks[name]


SPLITS = ("train", "dev", "test")


def split_examples(examples: list[Any], *, seed: int = 0) -> dict[str, list[Any]]:
    """Train, dev and test parts. An example that carries its `split` keeps it (the reconcile
    set is split by template family when it is made); the others are split by their `group`
    (conversation, scenario) the way the reconcile set splits families, so no group is in two
    parts and a dev or test score is about conversations the optimizer never saw."""
    from evals.data.make_reconcile import family_splits

    ungrouped = sorted({str(example.get("group")) for example in examples if not example.get("split")})
    by_group = family_splits(ungrouped, seed=seed) if ungrouped else {}
    parts: dict[str, list[Any]] = {name: [] for name in SPLITS}
    for example in examples:
        parts[example.get("split") or by_group[str(example.get("group"))]].append(example)
    return parts
