"""The lifecycle simulation: a synthetic year of one user's memories, recalled the way memories
are (a few often, some now and then, most never), with weekly maintenance.

    python -m evals.lifecycle                           # 365 days, ~7 memories a day, MiniLM
    python -m evals.lifecycle --days 120 --per-day 3 --embedder test --base-days 10   # smoke

Two files receive the same adds and the same queries at the same simulated times (set_clock):
"maintained" runs `maintain()` every 7 days, "unmaintained" never does. Each memory is a raw
turn (no LM) from evals/synthetic.py; its question, people named by first name only, is the
query that targets it. At creation a memory is hot (asked about on ~3 days a week), warm (every
2-4 weeks) or cold (never); asking is `search(question, k=10)`. With --recall hits (the
library's way) that search recalls its top `lifecycle.recalls_per_search` hits (default 5;
--recalls-per-search 10 counts all, and cold memories are recalled as other questions'
neighbours); --recall used counts only the fact asked about (read with get() when found),
--recall none counts nothing (track_access=False).

At the end (right after a last maintenance) we ask the question of every fact recalled in the
last 30 days and report recall@10 in both files: forgetting must not lose what is used while
the active set shrinks. Old never-recalled facts are asked with include_archived=True in the
maintained file, to show archived memories stay reachable. The plot shows retention R(t) of a
cold, a warm and a hot memory, and active/archived counts per week.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.config import LifecycleConfig
from dspy_memory.embed import make_embedder
from dspy_memory.util.timeutil import set_clock
from evals.report import (
    RESULTS_DIR,
    command_line,
    machine,
    markdown_report,
    progress,
    stage,
    table,
    write_json,
)
from evals.synthetic import LAST, generate

USER = "ada"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)
CLASSES = ("hot", "warm", "cold")
RECENT_DAYS = 30
SURNAMES = re.compile(r"\s+(?:" + "|".join(LAST) + r")\b")
OLD_SAMPLE = 200


@dataclass
class Fact:
    index: int
    day: int
    text: str
    question: str
    kind: str
    recalled_on: list[int] = field(default_factory=list)


class Clock:
    """The simulated time every timestamp the library writes comes from."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def at(self, day: int, minutes: float) -> None:
        self.now = START + timedelta(days=day, minutes=minutes)


def schedule(args: argparse.Namespace) -> tuple[list[Fact], dict[int, list[Fact]]]:
    """The facts (with their day and class) and, per day, the facts asked about: all drawn from
    the seed alone, never from what a search returned, so both files get the same queries."""
    rng = random.Random(args.seed)
    per_day = [rng.randint(max(1, args.per_day - 2), args.per_day + 2) for _ in range(args.days)]
    corpus = generate(sum(per_day), seed=args.seed)
    facts: list[Fact] = []
    for day, count in enumerate(per_day):
        for item in corpus[len(facts) : len(facts) + count]:
            draw = rng.random()
            kind = "hot" if draw < args.hot else "warm" if draw < args.hot + args.warm else "cold"
            # People are asked about by first name ("where did Quinn move?"): with full names
            # every question finds its fact (recall@10 1.000 in both files, nothing to compare).
            facts.append(Fact(len(facts), day, item.text, SURNAMES.sub("", item.question), kind))
    asked: dict[int, list[Fact]] = {day: [] for day in range(args.days)}
    for fact in facts:
        if fact.kind == "hot":
            days = [d for d in range(fact.day + 1, args.days) if rng.random() < 3 / 7]
        elif fact.kind == "warm":
            days, d = [], fact.day
            while (d := d + rng.randint(14, 28)) < args.days:
                days.append(d)
        else:
            days = []
        fact.recalled_on = days
        for d in days:
            asked[d].append(fact)
    for day in asked.values():
        rng.shuffle(day)
    return facts, asked


class Twin:
    """One of the two files, with what was measured in it."""

    def __init__(self, name: str, path: Path, embedder: Any, settings: dict[str, Any], recall: str) -> None:
        self.name = name
        self.memory = Memory(str(path), embedder=embedder, track_access=recall == "hits", **settings)
        # --recall used: searches count nothing; a second handle on the file, which counts, reads
        # the one memory the agent used (get() counts only where track_access is on).
        self.reader = Memory(str(path), embedder=embedder, **settings) if recall == "used" else None
        self.ids: dict[int, str] = {}
        self.weeks: list[dict[str, Any]] = []
        self.live: list[bool] = []
        self.search_ms: list[float] = []
        self.curves: dict[str, list[tuple[float, float]]] = {}
        self.archived_on: dict[str, float] = {}

    def add(self, fact: Fact) -> None:
        self.ids[fact.index] = self.memory.add(fact.text, user_id=USER, infer=False).memories[0].id

    def found(self, fact: Fact, *, include_archived: bool = False, use: bool = False) -> bool:
        start = time.perf_counter()
        hits = self.memory.search(fact.question, user_id=USER, k=10, include_archived=include_archived)
        self.search_ms.append((time.perf_counter() - start) * 1000)
        found = self.ids[fact.index] in {hit.id for hit in hits}
        if found and use and self.reader is not None:
            self.reader.get(self.ids[fact.index], user_id=USER)
        return found

    def sample(self, day: float, examples: dict[str, Fact]) -> None:
        """R now of each example memory (get(recall=False): looking is not recalling)."""
        for kind, fact in examples.items():
            if fact.index not in self.ids:
                continue
            record = self.memory.get(self.ids[fact.index], user_id=USER, recall=False)
            self.curves.setdefault(kind, []).append((day, record.retention))
            if record.archived_at is not None and kind not in self.archived_on:
                self.archived_on[kind] = day

    def week(self, day: int, report: Any) -> None:
        stats = self.memory.stats()
        life = stats["lifecycle"]
        self.weeks.append(
            {
                "day": day,
                "active": stats["current_memories"] - stats["archived_memories"],
                "archived": stats["archived_memories"],
                "retention_p10": life["retention_p10"],
                "retention_median": life["retention_median"],
                "archived_this_week": report.archived if report else 0,
                "restored_this_week": report.restored if report else 0,
            }
        )


def by_class_recalls(twin: Twin, facts: list[Fact]) -> dict[str, float]:
    """Share of each class's memories recalled at least once (with --recall hits, memories
    never asked about are recalled too, as other queries' neighbours)."""
    records = twin.memory.get_all(user_id=USER, include_archived=True, limit=len(facts) + 1)
    count = {record.id: record.access_count for record in records}
    shares = {}
    for kind in CLASSES:
        members = [twin.ids[f.index] for f in facts if f.kind == kind]
        shares[f"ever_recalled_{kind}"] = (
            sum(count.get(i, 0) > 0 for i in members) / len(members) if members else float("nan")
        )
    return shares


def recall_at_10(twin: Twin, facts: list[Fact], **options: Any) -> float:
    return sum(twin.found(fact, **options) for fact in facts) / len(facts) if facts else float("nan")


def simulate(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    facts, asked = schedule(args)
    embedder = make_embedder(args.embedder)  # one, shared: each text is embedded once
    settings: dict[str, Any] = {"lifecycle": {"base_days": args.base_days}}
    if args.retention_weight is not None:
        settings["retrieval"] = {"retention_weight": args.retention_weight}
    if args.recalls_per_search is not None:
        settings["lifecycle"] = {
            **settings.get("lifecycle", {}),
            "recalls_per_search": args.recalls_per_search,
        }
    clock = Clock()
    set_clock(clock)
    twins = [
        Twin(name, tmp / f"{name}.db", embedder, settings, args.recall)
        for name in ("maintained", "unmaintained")
    ]
    maintained, unmaintained = twins
    # The first memory of each class: the longest curves.
    examples = {
        kind: next(f for f in facts if f.kind == kind) for kind in CLASSES if kind in {f.kind for f in facts}
    }
    maintain_s: list[float] = []
    started = time.perf_counter()
    try:
        for day in progress(range(args.days), total=args.days, desc="days"):
            today = [fact for fact in facts if fact.day == day]
            # Two hours apart: raw turns said within an hour share keyword context (turn_context).
            spacing = min(120.0, 960.0 / max(1, len(today)))
            for number, fact in enumerate(today):
                clock.at(day, 8 * 60 + number * spacing)
                for twin in twins:
                    twin.add(fact)
            for number, fact in enumerate(asked[day]):
                clock.at(day, 23 * 60 + number * 0.5)
                for twin in twins:
                    twin.live.append(twin.found(fact, use=True))
            clock.at(day + 1, 0)
            for twin in twins:
                twin.sample(day + 1.0, examples)
            if (day + 1) % 7 == 0 or day + 1 == args.days:
                begin = time.perf_counter()
                report = maintained.memory.maintain(user_id=USER)
                maintain_s.append(time.perf_counter() - begin)
                maintained.week(day + 1, report)
                unmaintained.week(day + 1, None)
        simulated_s = time.perf_counter() - started

        end = args.days - RECENT_DAYS
        recent = [fact for fact in facts if any(d >= end for d in fact.recalled_on)]
        old = [f for f in facts if f.kind == "cold" and f.day < args.days - args.old_after_days]
        old = random.Random(args.seed).sample(old, min(OLD_SAMPLE, len(old)))
        clock.at(args.days, 9 * 60)
        bycatch = {twin.name: by_class_recalls(twin, facts) for twin in twins}
        for twin in twins:
            twin.search_ms.clear()
        measured = {
            twin.name: {
                "recent_recall_at_10": recall_at_10(twin, recent),
                "recent_hot_recall_at_10": recall_at_10(twin, [f for f in recent if f.kind == "hot"]),
                "recent_warm_recall_at_10": recall_at_10(twin, [f for f in recent if f.kind == "warm"]),
                "old_recall_at_10": recall_at_10(twin, old),
                "old_recall_at_10_include_archived": recall_at_10(twin, old, include_archived=True),
                "search_ms_p50": statistics.median(twin.search_ms) if twin.search_ms else None,
            }
            for twin in twins
        }
        result: dict[str, Any] = {
            "settings": {key: value for key, value in vars(args).items() if key not in ("out", "plot")},
            "embedder": embedder.name,
            "memories": len(facts),
            "facts_by_class": {kind: sum(f.kind == kind for f in facts) for kind in CLASSES},
            "queries": sum(len(day) for day in asked.values()),
            "recent_facts": len(recent),
            "old_facts_sampled": len(old),
            "simulated_seconds": round(simulated_s, 1),
            "maintain_seconds_p50": round(statistics.median(maintain_s), 4) if maintain_s else None,
            "examples": {kind: fact.text for kind, fact in examples.items()},
            "twins": {},
        }
        for twin in twins:
            last = twin.weeks[-1]
            result["twins"][twin.name] = {
                "active": last["active"],
                "archived": last["archived"],
                "live_recall_at_10": sum(twin.live) / len(twin.live) if twin.live else None,
                **measured[twin.name],
                **bycatch[twin.name],
                "weeks": twin.weeks,
                "retention_curves": twin.curves,
                "archived_on_day": twin.archived_on,
            }
        return result
    finally:
        for twin in twins:
            for handle in (twin.memory, twin.reader):
                if handle is not None:
                    handle.close()
        set_clock(None)


def tables(result: dict[str, Any]) -> str:
    twins = result["twins"]
    names = list(twins)
    labels = {
        "active": "active memories at the end",
        "archived": "archived memories",
        "recent_recall_at_10": f"recall@10, facts recalled in the last {RECENT_DAYS} days ({result['recent_facts']})",
        "recent_hot_recall_at_10": "  of them hot",
        "recent_warm_recall_at_10": "  of them warm",
        "old_recall_at_10": f"recall@10, old never-recalled facts ({result['old_facts_sampled']}), default search",
        "old_recall_at_10_include_archived": "  the same with include_archived=True",
        "live_recall_at_10": "recall@10 of the year's live queries",
        "search_ms_p50": "search p50 ms (end-of-year queries)",
        **{f"ever_recalled_{kind}": f"share of {kind} memories ever recalled" for kind in CLASSES},
    }
    rows = [[label, *(twins[name][key] for name in names)] for key, label in labels.items()]
    head = (
        f"Lifecycle simulation: {result['settings']['days']} days, {result['memories']} memories "
        f"({', '.join(f'{v} {k}' for k, v in result['facts_by_class'].items())}), "
        f"{result['queries']} recall queries (recall: {result['settings']['recall']}), "
        f"embedder {result['embedder']}, "
        f"base_days {result['settings']['base_days']}; simulated in {result['simulated_seconds']} s, "
        f"maintain() p50 {result['maintain_seconds_p50']} s"
    )
    weeks = twins["maintained"]["weeks"]
    quarter = [w for i, w in enumerate(weeks) if (i + 1) % 13 == 0 or i == len(weeks) - 1]
    columns = ("day", "active", "archived", "archived_this_week", "restored_this_week")
    by_week = table(
        [*(name.replace("_", " ") for name in columns), "R p10", "R median"],
        [[w[c] for c in (*columns, "retention_p10", "retention_median")] for w in quarter],
    )
    return "\n\n".join([head, table(["", *names], rows), "The maintained file over the year", by_week])


def plot(result: dict[str, Any], path: str | Path, archive_below: float) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    maintained = result["twins"]["maintained"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for kind, points in maintained["retention_curves"].items():
        days, values = zip(*points)
        left.plot(days, values, label=f"{kind}: {result['examples'][kind][:38]}...", linewidth=1.2)
        if kind in maintained["archived_on_day"]:
            left.axvline(maintained["archived_on_day"][kind], color="grey", linestyle=":", linewidth=1)
    left.axhline(
        archive_below, color="red", linestyle="--", linewidth=1, label=f"archive below {archive_below}"
    )
    left.set(xlabel="day", ylabel="retention R", title="Retention of three memories (maintained file)")
    left.set_ylim(0, 1.05)
    left.legend(fontsize=7)
    for name, style in (("maintained", "-"), ("unmaintained", "--")):
        weeks = result["twins"][name]["weeks"]
        right.plot([w["day"] for w in weeks], [w["active"] for w in weeks], style, label=f"active ({name})")
    weeks = maintained["weeks"]
    right.plot([w["day"] for w in weeks], [w["archived"] for w in weeks], label="archived (maintained)")
    right.set(xlabel="day", ylabel="memories", title="Active and archived memories, weekly maintenance")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--per-day", type=int, default=7, help="new memories a day, on average (+-2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="local", help='"local" (MiniLM) or "test" (hash, smoke runs)')
    parser.add_argument("--hot", type=float, default=0.05, help="share of memories recalled ~3 days a week")
    parser.add_argument("--warm", type=float, default=0.15, help="share recalled every 2-4 weeks")
    parser.add_argument(
        "--recall",
        choices=("hits", "used", "none"),
        default="hits",
        help="hits: a search recalls its top hits (the library's way, see --recalls-per-search); used: searches count "
        "nothing (track_access=False) and the fact asked about, when found, is read with get(); "
        "none: nothing is counted (track_access=False)",
    )
    parser.add_argument("--base-days", type=float, default=30.0, help="lifecycle.base_days of both files")
    parser.add_argument("--retention-weight", type=float, default=None, help="retrieval.retention_weight")
    parser.add_argument(
        "--recalls-per-search",
        type=int,
        default=None,
        help="lifecycle.recalls_per_search (hits counted as recalls)",
    )
    parser.add_argument(
        "--old-after-days", type=int, default=180, help="'old': stored at least this long ago"
    )
    parser.add_argument("--out", default=str(RESULTS_DIR / "lifecycle.json"))
    parser.add_argument("--plot", default=str(RESULTS_DIR / "lifecycle.png"))
    args = parser.parse_args(argv)
    if args.days < RECENT_DAYS + 7 or args.per_day < 1 or not 0 <= args.hot + args.warm <= 1:
        parser.error(f"need --days >= {RECENT_DAYS + 7}, --per-day >= 1 and --hot + --warm <= 1")
    stage(f"simulating {args.days} days with embedder {args.embedder}, two files side by side")
    with tempfile.TemporaryDirectory() as tmp:
        result = simulate(args, Path(tmp))
    result["machine"] = machine()
    shown = tables(result)
    print(shown)
    write_json(args.out, result)
    plot(result, args.plot, archive_below=LifecycleConfig().archive_below)
    command = command_line("evals.lifecycle", argv)
    title = "Lifecycle: forgetting without losing what is used"
    report = Path(args.out).with_suffix(".md")
    report.write_text(
        markdown_report(
            result, title=title, text=shown, plot=args.plot, out=args.out, command=command, lm=None
        ),
        encoding="utf-8",
    )
    print(f"\nwrote {args.out}, {report} and {args.plot}")
    return result


if __name__ == "__main__":
    main()
