"""`python -m evals.locomo_retrieval --cv`: every retrieval setting chosen by leave-one-
conversation-out cross-validation on the LoCoMo development split, and the recall of what was
chosen measured on the conversation left out.

For each of the five development conversations in turn, the other four choose the settings.
Keyword search first, in four stages: the context window (stage 1: `turn_context_before/after`,
`keyword_context_weight`), then, with those, the candidates per source and what was said around
a strong hit, jointly (stage 2: `candidates`, `said_together_weight`), then the time boosts and
graph expansion (stage 3: `temporal_weight`, `when_weight`, `graph_in_hybrid`, `graph_depth`),
then the boost of what a speaker the query names said (stage 4: `speaker_weight`). Hybrid search
keeps every one of keyword's choices and chooses only how dense search joins it (the fusion
stage: `fusion`, `rrf_k`, `dense_weight` and the sources' agreement, `agreement_depth`,
`agreement_share`, `disagreement_dense_weight`, jointly): the library has one set of settings
for every recipe, and hybrid is then keyword plus dense, so a fold compares the two on the same
index, boosts and candidates. Dense search has stages 2-4. At each stage the anchor's setting
(the ANCHOR's, or for the fusion stage keyword's choice with the ANCHOR's fusion) stays unless
another beats it by more than MARGIN on the four. The conversation left out is then searched
with what was chosen. The cross-validated number pools the held-out questions of the five
folds: it estimates what the whole procedure gives on a conversation it never saw. The same
procedure on all five conversations gives the settings it recommends, which the library's
defaults should be.

The test split is never read here. `python -m evals.locomo_retrieval --split test` measures
the defaults on it, once.

Each setting's searches go through `Memory.search`; what the dense and keyword sources return
for one index does not depend on the read-time settings tried, so each source answers each
question once per index (`SourceCache`) and the 300-odd settings take minutes. A check at the
start compares the cached and uncached results of the defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dspy_memory import Memory
from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import make_embedder
from dspy_memory.learn.stats import paired_interval, verdict
from evals.locomo import CATEGORY_NAMES, Conversation
from evals.locomo_retrieval import KS, Answered, ask, index_conversation, summarize
from evals.report import bar_chart, machine, progress, stage, table, write_json

# Stage 1. The context window is fixed when turns are indexed (one index per window); its weight
# is a read-time setting. Without a context, the weight changes nothing: one value is tried.
WINDOWS = [(0, 0), (1, 1), (2, 0), (2, 1), (2, 2), (3, 1)]
CONTEXT_WEIGHTS = [0.25, 0.5, 1.0]
FUSIONS: list[dict[str, Any]] = [
    *(
        {"fusion": "rrf", "rrf_k": rrf_k, "dense_weight": weight}
        for rrf_k in (5.0, 10.0, 30.0)
        for weight in (0.5, 0.7, 1.0)
    ),
    *(
        {"fusion": fusion, "dense_weight": weight}
        for fusion in ("convex", "zscore")
        for weight in (0.3, 0.5, 0.7)
    ),
]
# Hybrid's fusion stage, with FUSIONS: how much less dense weighs when its top hits disagree with
# keyword's.
AGREEMENTS: list[dict[str, Any]] = [
    {"agreement_depth": 0},
    *(
        {"agreement_depth": depth, "agreement_share": share, "disagreement_dense_weight": floor}
        for depth, share, floor in itertools.product((10, 20), (0.25, 0.5), (0.1, 0.3))
    ),
]
# Stage 2, on the index stage 1 chose: how many candidates each source gives, and what was said
# around a strong hit rising with it.
CANDIDATES = (30, 60, 100)
SAID_TOGETHER: list[dict[str, Any]] = [{"said_together_weight": weight} for weight in (0.0, 0.1, 0.2, 0.3)]
# Stage 3, on what stages 1 and 2 chose.
BOOSTS: list[dict[str, Any]] = [
    {
        "temporal_weight": temporal,
        "when_weight": when,
        "graph_in_hybrid": depth is not None,
        "graph_depth": depth or 1,
    }
    for temporal, when, depth in itertools.product((0.0, 0.2, 0.4, 0.6), (0.0, 0.1), (None, 1, 2))
]
# Stage 4, on what stages 1-3 chose: what a speaker the query names said.
SPEAKERS: list[dict[str, Any]] = [{"speaker_weight": weight} for weight in (0.0, 0.1, 0.2, 0.3)]
RECIPES = ("keyword", "dense", "hybrid")
Setting = tuple[tuple[int, int], tuple[tuple[str, Any], ...]]  # (window, read-time settings)


def stage_one(recipe: str) -> list[Setting]:
    """The settings stage 1 tries for `recipe` (keyword or dense), each a (window, read-time
    settings) pair."""
    if recipe == "dense":  # the window changes nothing dense search finds
        return [((ANCHOR.turn_context_before, ANCHOR.turn_context_after), ())]
    return [
        (window, (("keyword_context_weight", weight),))
        for window in WINDOWS
        for weight in (CONTEXT_WEIGHTS if any(window) else [ANCHOR.keyword_context_weight])
    ]


class SourceCache:
    """Stands in for a Memory's store: answers its dense and keyword searches from a cache
    shared by every Memory opened on the same index, and passes everything else through.
    The keyword index's context weight is part of the key (it weighs the BM25 columns)."""

    def __init__(self, store: Any, cache: dict[Any, Any], context_weight: float) -> None:
        self._store, self._cache, self._weight = store, cache, context_weight

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def dense_search(self, query: Any, scope: Any, predicate: Any, n: int, **options: Any) -> Any:
        key = ("dense", query.tobytes(), scope, n)
        if key not in self._cache:
            self._cache[key] = self._store.dense_search(query, scope, predicate, n, **options)
        return self._cache[key]

    def keyword_search(self, terms: list[str], scope: Any, predicate: Any, n: int, **options: Any) -> Any:
        key = ("keyword", tuple(terms), scope, n, self._weight)
        if key not in self._cache:
            self._cache[key] = self._store.keyword_search(terms, scope, predicate, n, **options)
        return self._cache[key]


class Trials:
    """Per-question results of (recipe, setting), measured once each over every conversation.
    `dbs`: per context window, the file each conversation is indexed in (one for all, or one
    each with --file-per-conversation)."""

    def __init__(
        self, conversations: list[Conversation], embedder: Any, dbs: dict[tuple[int, int], dict[str, str]]
    ) -> None:
        self.conversations, self.embedder, self.dbs = conversations, embedder, dbs
        self.results: dict[tuple[str, Setting], list[Answered]] = {}
        self._caches: dict[tuple[int, int], dict[Any, Any]] = {window: {} for window in dbs}

    def measure(self, recipe: str, setting: Setting, *, cached: bool = True) -> list[Answered]:
        key = (recipe, setting)
        if key in self.results and cached:
            return self.results[key]
        window, _ = setting
        retrieval = retrieval_of(setting)
        answered: list[Answered] = []
        with contextlib.ExitStack() as opened:
            memories: dict[str, Memory] = {}
            for conversation in self.conversations:
                path = self.dbs[window][conversation.sample_id]
                if path not in memories:
                    # track_access off: a recall would strengthen what earlier questions found.
                    memory = opened.enter_context(
                        Memory(path, embedder=self.embedder, retrieval=retrieval, track_access=False)
                    )
                    if cached:
                        retriever = memory._retriever  # the eval's seam: the sources' answers are cached
                        retriever.store = SourceCache(
                            retriever.store,
                            self._caches[window],
                            retrieval.get("keyword_context_weight", 0.5),
                        )
                    memories[path] = memory
                answered += ask(memories[path], conversation, recipe)[0]
        if cached:
            self.results[key] = answered
        return answered


def score(answered: list[Answered], conversations: set[str]) -> tuple[float, float]:
    """(mean R@10, mean nDCG@10) over the questions of `conversations`."""
    chosen = [a for a in answered if a.conversation in conversations]
    if not chosen:
        return 0.0, 0.0
    return sum(a.recall[10] for a in chosen) / len(chosen), sum(a.ndcg for a in chosen) / len(chosen)


# A setting other than the library's default is chosen only when it beats the default by more
# than this much R@10 on the training conversations (about four questions in 760): smaller
# differences are noise, and chasing them is what over-fits five conversations. Fixed before
# looking at any held-out result; the CV measures the procedure with it.
MARGIN = 0.005


# Where each stage starts: the settings before any cross-validation chose them (those of the
# earlier in-sample sweeps; every mechanism this CV added since starts off), each named. Not the
# library's defaults: those are what this procedure recommends on all five conversations, and a
# fold anchored on them would be anchored on its own held-out conversation.
ANCHOR = RetrievalConfig(
    turn_context_before=2,
    turn_context_after=1,
    keyword_context_weight=0.5,
    fusion="rrf",
    rrf_k=10.0,
    dense_weight=0.7,
    agreement_depth=0,
    candidates=30,
    said_together_weight=0.0,
    temporal_weight=0.4,
    when_weight=0.1,
    graph_in_hybrid=True,
    graph_depth=1,
    speaker_weight=0.0,
)


def is_anchor(setting: Setting) -> bool:
    """Whether every setting named is the ANCHOR's."""
    window, read = setting
    return window == (ANCHOR.turn_context_before, ANCHOR.turn_context_after) and all(
        getattr(ANCHOR, name) == value for name, value in read
    )


def choose(
    candidates: list[Setting],
    measure: Callable[[Setting], list[Answered]],
    train: set[str],
    *,
    margin: float = 0.0,
    anchor: Setting | None = None,
) -> Setting:
    """The setting with the best R@10 (then nDCG@10) on `train`, the first of equals; the
    `anchor` (default: the candidate that is the ANCHOR's) instead when it is within `margin` of
    that R@10."""
    best = max(candidates, key=lambda setting: score(measure(setting), train))
    if anchor is None:
        anchor = next((setting for setting in candidates if is_anchor(setting)), None)
    if anchor is not None and score(measure(anchor), train)[0] >= score(measure(best), train)[0] - margin:
        return anchor
    return best


def stage_two() -> list[dict[str, Any]]:
    """The settings stage 2 tries, jointly: more candidates give said-together more to work with."""
    return [{"candidates": n, **together} for n in CANDIDATES for together in SAID_TOGETHER]


def fusion_stage() -> list[dict[str, Any]]:
    """The settings hybrid's fusion stage tries, jointly: the fusion and the sources' agreement
    (agreement moves dense's weight, which the fusion sets)."""
    return [{**fusion, **agreement} for fusion in FUSIONS for agreement in AGREEMENTS]


# Where the fusion stage starts: the ANCHOR's fusion, the sources' agreement off.
FUSION_ANCHOR = {
    "fusion": ANCHOR.fusion,
    "rrf_k": ANCHOR.rrf_k,
    "dense_weight": ANCHOR.dense_weight,
    "agreement_depth": 0,
}


def settings_tried(recipe: str) -> int:
    tried = len(stage_two()) + len(BOOSTS) + len(SPEAKERS)
    if recipe == "hybrid":
        return settings_tried("keyword") + len(fusion_stage())
    return len(stage_one(recipe)) + tried


def with_boosts(setting: Setting, boosts: dict[str, Any]) -> Setting:
    window, read = setting
    return window, tuple(sorted({**dict(read), **boosts}.items()))


def select(trials: Trials, recipe: str, train: set[str]) -> Setting:
    """Stages 1 to 4 (hybrid: keyword's, then the fusion stage), each chosen on `train` only."""

    def measure(setting: Setting) -> list[Answered]:
        return trials.measure(recipe, setting)

    if recipe == "hybrid":
        shared = select(trials, "keyword", train)
        return choose(
            [with_boosts(shared, fusion) for fusion in fusion_stage()],
            measure,
            train,
            margin=MARGIN,
            anchor=with_boosts(shared, FUSION_ANCHOR),
        )
    first = choose(stage_one(recipe), measure, train, margin=MARGIN)
    second = choose([with_boosts(first, sources) for sources in stage_two()], measure, train, margin=MARGIN)
    third = choose([with_boosts(second, boosts) for boosts in BOOSTS], measure, train, margin=MARGIN)
    return choose([with_boosts(third, speaker) for speaker in SPEAKERS], measure, train, margin=MARGIN)


def describe(setting: Setting) -> str:
    """ "window 2,1, dense_weight 0.7, ..." (graph_depth only when the graph is on)."""
    window, read = setting
    shown = dict(read)
    if not shown.get("graph_in_hybrid"):
        shown.pop("graph_depth", None)
    return ", ".join(
        [f"window {window[0]},{window[1]}", *(f"{name} {value}" for name, value in shown.items())]
    )


def setting_of(config: RetrievalConfig) -> Setting:
    """`config`'s values of every setting the stages choose."""
    names = ("keyword_context_weight", *FUSION_ANCHOR, *stage_two()[0], *BOOSTS[0], *SPEAKERS[0])
    return (
        (config.turn_context_before, config.turn_context_after),
        tuple(sorted({name: getattr(config, name) for name in names}.items())),
    )


def retrieval_of(setting: Setting) -> dict[str, Any]:
    """The retrieval settings a trial of `setting` searches with: what it names, and the
    ANCHOR's value of every other setting a stage chooses. Not the library's: a stage-1 trial
    measured with the defaults of later stages would measure them as chosen on all five
    conversations, its fold's held-out one among them."""
    window, read = setting
    return {
        **dict(setting_of(ANCHOR)[1]),
        "turn_context_before": window[0],
        "turn_context_after": window[1],
        **dict(read),
    }


def cross_validate(args: argparse.Namespace, conversations: list[Conversation]) -> dict[str, Any]:
    if len(conversations) < 2:
        raise SystemExit("--cv needs at least two conversations (one is held out at a time)")
    if args.facts != "turns":
        raise SystemExit("--cv measures raw turns; facts have no conversation context to choose")
    embedder = make_embedder(args.embedder)
    names = [c.sample_id for c in conversations]
    alone = getattr(args, "file_per_conversation", False)
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {
            window: {
                name: str(Path(tmp) / f"context_{window[0]}_{window[1]}{'_' + name if alone else ''}.db")
                for name in names
            }
            for window in WINDOWS
        }
        for window, files in dbs.items():
            stage(f"indexing turns with the context window {window}")
            for conversation in conversations:
                with Memory(
                    files[conversation.sample_id],
                    embedder=embedder,
                    retrieval=dict(zip(("turn_context_before", "turn_context_after"), window)),
                ) as memory:
                    index_conversation(memory, conversation)
        trials = Trials(conversations, embedder, dbs)
        default_setting = setting_of(RetrievalConfig())
        cached, fresh = (
            score(trials.measure("hybrid", default_setting, cached=flag), set(names))
            for flag in (True, False)
        )
        if abs(cached[0] - fresh[0]) > 1e-9:
            raise SystemExit(f"the source cache changes results ({cached} vs {fresh}): the CV would be wrong")

        report: dict[str, Any] = {
            "data": str(args.data),
            "embedder": embedder.name,
            "machine": machine(),
            "conversations": names,
            "file_per_conversation": alone,
            "grid": {
                "windows": WINDOWS,
                "context_weights": CONTEXT_WEIGHTS,
                "fusions": FUSIONS,
                "sources": stage_two(),
                "fusion_stage": fusion_stage(),
                "boosts": BOOSTS,
                "said_together": SAID_TOGETHER,
                "speakers": SPEAKERS,
            },
            "anchor": describe(setting_of(ANCHOR)),
            "recipes": {},
        }
        held: dict[str, list[Answered]] = {}
        for recipe in RECIPES:
            stage(f"cross-validating the {recipe} recipe ({settings_tried(recipe)} settings a fold)")
            held_out: list[Answered] = []
            folds: dict[str, Any] = {}
            for name in progress(names, desc=f"{recipe}: folds"):
                setting = select(trials, recipe, set(names) - {name})
                found = [a for a in trials.measure(recipe, setting) if a.conversation == name]
                held_out += found
                folds[name] = {"setting": describe(setting), **summarize(found)}
            chosen = select(trials, recipe, set(names))
            in_sample = summarize(trials.measure(recipe, chosen))
            held[recipe] = held_out
            report["recipes"][recipe] = {
                "cv": summarize(held_out),
                "folds": folds,
                "chosen_on_all": describe(chosen),
                "chosen_on_all_in_sample": in_sample,
                # (fusion and the context weight change nothing for dense search)
                "defaults_in_sample": summarize(trials.measure(recipe, default_setting)),
                "settings_tried": settings_tried(recipe),
            }
        report["hybrid_against"] = {
            other: paired(held["hybrid"], held[other]) for other in ("keyword", "dense")
        }
    print_report(report)
    write_json(args.out, report)
    bar_chart(
        args.plot,
        names,
        {
            recipe: [report["recipes"][recipe]["folds"][name]["recall"]["overall"]["R@10"] for name in names]
            for recipe in RECIPES
        },
        title="LoCoMo dev, leave-one-conversation-out: held-out R@10 per conversation",
        ylabel="recall@10",
    )
    print(f"\nwrote {args.out} and {args.plot}")
    return report


def paired(answered: list[Answered], baseline: list[Answered]) -> dict[str, Any]:
    """Held-out R@10 of `answered` minus `baseline`, question by question (both lists hold the
    same questions in the same order): the mean, its paired bootstrap 95% interval, and how many
    questions each side won."""
    if [a.conversation for a in answered] != [b.conversation for b in baseline]:
        raise ValueError("the two recipes' held-out questions differ")
    ours, theirs = [a.recall[10] for a in answered], [b.recall[10] for b in baseline]
    low, high = paired_interval(theirs, [ours])
    return {
        "difference": sum(ours) / len(ours) - sum(theirs) / len(theirs),
        "interval": [low, high],
        "verdict": verdict((low, high)),
        "questions_better": sum(o > t for o, t in zip(ours, theirs)),
        "questions_worse": sum(o < t for o, t in zip(ours, theirs)),
    }


def print_report(report: dict[str, Any]) -> None:
    recipes = report["recipes"]
    names = report["conversations"]
    rows = []
    for name in names:
        recalls = {recipe: recipes[recipe]["folds"][name]["recall"]["overall"]["R@10"] for recipe in RECIPES}
        rows.append(
            [
                name,
                recipes["hybrid"]["folds"][name]["questions"]["overall"],
                *(recalls[recipe] for recipe in RECIPES),
                recipes["hybrid"]["folds"][name]["session_recall"]["overall"]["sR@10"],
                "yes" if recalls["hybrid"] >= max(recalls["keyword"], recalls["dense"]) else "NO",
                recipes["hybrid"]["folds"][name]["setting"],
            ]
        )
    files = ", each conversation in a file of its own" if report.get("file_per_conversation") else ""
    print(f"\nLoCoMo dev, leave-one-conversation-out{files}: R@10 on the held-out conversation\n")
    print(
        table(
            [
                "held out",
                "questions",
                "keyword",
                "dense",
                "hybrid",
                "hybrid sR@10",
                "hybrid >= both",
                "hybrid settings chosen by the other four",
            ],
            rows,
        )
    )
    rows = [
        [
            f"hybrid - {other}",
            f"{value['difference']:+.4f}",
            f"[{value['interval'][0]:+.4f}, {value['interval'][1]:+.4f}]",
            value["verdict"],
            value["questions_better"],
            value["questions_worse"],
        ]
        for other, value in report.get("hybrid_against", {}).items()
    ]
    print("\nHeld-out R@10, question by question (paired bootstrap 95% interval)\n")
    print(
        table(["difference", "mean", "95% interval", "verdict", "questions better", "questions worse"], rows)
    )
    groups = ["overall"] + [CATEGORY_NAMES[c] for c in (1, 2, 3, 4)]
    rows = []
    for recipe in RECIPES:
        cv = recipes[recipe]["cv"]
        for group in groups:
            if group in cv["recall"]:
                rows.append(
                    [
                        recipe,
                        group,
                        cv["questions"][group],
                        *(cv["recall"][group][f"R@{k}"] for k in KS),
                        *(cv["session_recall"][group][f"sR@{k}"] for k in KS),
                        cv["ndcg@10"][group],
                    ]
                )
    print("\nCross-validated (held-out questions of the five folds pooled)\n")
    print(
        table(
            ["recipe", "category", "questions", *(f"R@{k}" for k in KS), *(f"sR@{k}" for k in KS), "nDCG@10"],
            rows,
        )
    )
    rows = [
        [
            recipe,
            recipes[recipe]["cv"]["recall"]["overall"]["R@10"],
            recipes[recipe]["chosen_on_all_in_sample"]["recall"]["overall"]["R@10"],
            recipes[recipe]["defaults_in_sample"]["recall"]["overall"]["R@10"],
            recipes[recipe]["chosen_on_all"],
        ]
        for recipe in RECIPES
    ]
    print("\nCV against in-sample: what choosing on the same questions would have claimed\n")
    print(
        table(
            [
                "recipe",
                "CV R@10",
                "chosen on all five, in-sample R@10",
                "defaults R@10 (in-sample)",
                "settings chosen on all five",
            ],
            rows,
        )
    )
