"""The temporal eval: multi-session scenarios with questions about the present, the past
("where did she live in June 2023?"), dates ("when did she move?") and changes.

    python -m evals.temporal [--lm MODEL] [--embedder local|test] [--rewrite]

Scenarios are project-written (evals/data/temporal.json: 8 scenarios, 24 questions). Each
message is annotated with the facts it holds, so without --lm the scripted oracle writes the
memories and the answer is the top memory at the question's annotated date (a baseline that is
told the date); with --lm the LM writes the memories and answers through `memory.answer`
(with --rewrite it plans the date itself). Scores: token F1 (LoCoMo normalization) and whether
the normalized gold answer is contained in the answer, per question type.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from evals.metrics import normalize_answer, token_f1
from evals.report import RESULTS_DIR, machine, progress, save, table
from evals.sampling import add_limit_arguments, stratified

DATA = Path(__file__).resolve().parent / "data" / "temporal.json"


def load_scenarios(path: str | Path = DATA) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _messages(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {key: value for key, value in message.items() if key != "facts"} for message in session["messages"]
    ]


def run_scenario(
    scenario: dict[str, Any], *, lm: Any, embedder: Any, rewrite: bool, path: Path
) -> list[dict[str, Any]]:
    from dspy_memory.testing import oracle_write_lm

    facts = {m["content"]: m.get("facts", []) for s in scenario["sessions"] for m in s["messages"]}
    writer = lm if lm is not None else oracle_write_lm(facts)
    user = scenario["user"]
    rows = []
    with Memory(path, embedder=embedder, lm=writer) as memory:
        for session in scenario["sessions"]:
            memory.add(_messages(session), user_id=user, at=session["at"])
        today = scenario["sessions"][-1]["at"]
        for item in scenario["questions"]:
            if lm is None:
                hits = memory.search(
                    item["question"],
                    user_id=user,
                    k=1,
                    as_of=item.get("as_of"),
                    kinds=["fact", "preference", "event", "profile", "note"],
                )
                answer, calls = (hits[0].content if hits else "No information available"), 0
            else:
                result = memory.answer(item["question"], user_id=user, today=today, rewrite=rewrite)
                answer, calls = result.answer, result.usage.lm_calls
            gold = normalize_answer(item["answer"])
            rows.append(
                {
                    "scenario": scenario["id"],
                    "type": item["type"],
                    "question": item["question"],
                    "gold": item["answer"],
                    "answer": answer,
                    "f1": token_f1(answer, item["answer"]),
                    "contains": 1.0 if gold and gold in normalize_answer(answer) else 0.0,
                    "lm_calls": calls,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--lm", default=None, help="DSPy model string (default: scripted oracle + baseline)")
    parser.add_argument("--rewrite", action="store_true", help="let RewriteQuery plan searches and dates")
    parser.add_argument("--embedder", default="local")
    add_limit_arguments(parser, "scenarios", "scenarios")
    parser.add_argument("--threads", type=int, default=1, help="scenarios in parallel")
    parser.add_argument("--out", default=str(RESULTS_DIR / "temporal.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "temporal.png"))
    args = parser.parse_args(argv)
    lm = None
    if args.lm:
        import dspy

        lm = dspy.LM(args.lm)
    return evaluate(
        stratified(
            load_scenarios(args.data), args.limit, key=lambda scenario: scenario["id"], seed=args.seed
        ),
        lm=lm,
        embedder=args.embedder,
        rewrite=args.rewrite,
        threads=args.threads,
        out=args.out,
        plot=args.plot,
    )


def evaluate(
    scenarios: list[dict[str, Any]],
    *,
    lm: Any,
    embedder: Any,
    rewrite: bool = False,
    threads: int = 1,
    out: str | Path,
    plot: str | Path,
) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    from dspy_memory.embed import make_embedder

    embedder = make_embedder(embedder)  # one model shared by every scenario's file
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        jobs = [
            pool.submit(
                run_scenario, scenario, lm=lm, embedder=embedder, rewrite=rewrite, path=Path(tmp) / f"{i}.db"
            )
            for i, scenario in enumerate(scenarios)
        ]
        for job in progress(jobs, desc="scenarios"):
            rows += job.result()
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["type"]].append(row)
        groups["overall"].append(row)
    summary = {
        name: {
            "questions": len(items),
            "f1": sum(r["f1"] for r in items) / len(items),
            "contains": sum(r["contains"] for r in items) / len(items),
            "lm_calls": sum(r["lm_calls"] for r in items),
        }
        for name, items in groups.items()
    }
    label = getattr(lm, "model", None) or "scripted oracle writer, top memory at the annotated date"
    order = ["overall", *sorted(name for name in summary if name != "overall")]
    heading = f"Temporal eval: {len(scenarios)} scenarios, {len(rows)} questions, {label}"
    shown = table(
        ["type", "questions", "F1", "contains gold", "LM calls"],
        [
            [
                name,
                summary[name]["questions"],
                summary[name]["f1"],
                summary[name]["contains"],
                summary[name]["lm_calls"],
            ]
            for name in order
        ],
    )
    print(f"{heading}\n\n{shown}")
    results = {"machine": machine(), "lm": label, "summary": summary, "rows": rows}
    save(
        results,
        out=out,
        plot=plot,
        groups=order,
        series={"contains gold": [summary[name]["contains"] for name in order]},
        title="Temporal questions",
        ylabel="share of questions",
        text=f"{heading}\n\n{shown}",
    )
    return results


if __name__ == "__main__":
    main()
