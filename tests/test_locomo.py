import json
from pathlib import Path

import pytest

from evals.locomo import DEFAULT_DATA, load_locomo, normalize_dia_ids, parse_session_date
from evals.locomo_retrieval import main

MINI = [
    {
        "sample_id": "conv-mini",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {
                    "speaker": "Caroline",
                    "dia_id": "D1:1",
                    "text": "I went to an LGBTQ support group yesterday.",
                },
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "That sounds wonderful!",
                    "blip_caption": "a photo of a sunset over the lake",
                    "img_url": ["x"],
                    "query": "sunset",
                },
            ],
            "session_2_date_time": "7:55 pm on 9 June, 2023",
            "session_10_date_time": "1:00 pm on 1 July, 2023",
            "session_2": [
                {"speaker": "Melanie", "dia_id": "D2:1", "text": "I painted a sunrise in 2022."},
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "I am researching adoption agencies."},
            ],
        },
        "qa": [
            {
                "question": "When did Caroline go to the LGBTQ support group?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "When did Melanie paint a sunrise?",
                "answer": 2022,
                "evidence": ["D02:01; D1:2"],
                "category": 2,
            },
            {
                "question": "What is Caroline researching?",
                "answer": "Adoption agencies",
                "evidence": ["D2:2", "D", "D:11:26"],
                "category": 4,
            },
            {
                "question": "What did Melanie say about adoption?",
                "adversarial_answer": "nothing",
                "evidence": ["D2:2"],
                "category": 5,
            },
            {"question": "Broken evidence only", "answer": "x", "evidence": ["D9:9"], "category": 1},
        ],
        "observation": {},
        "event_summary": {},
        "session_summary": {},
    }
]


@pytest.fixture
def mini_file(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(MINI))
    return path


def test_loader_normalizes_the_released_format(mini_file):
    [conversation] = load_locomo(mini_file)
    assert [s.index for s in conversation.sessions] == [1, 2]  # session 10 has a date but no turns
    assert conversation.sessions[0].date_time.isoformat() == "2023-05-08T13:56:00+00:00"
    assert (
        conversation.turns[1].content()
        == "That sounds wonderful! [shared a photo: a photo of a sunset over the lake]"
    )
    questions = conversation.questions
    assert questions[1].answer == "2022" and questions[1].evidence == ["D2:1", "D1:2"]
    assert questions[2].evidence == ["D2:2"]
    assert questions[3].answer == "nothing" and questions[3].category_name == "adversarial"


def test_helpers():
    assert normalize_dia_ids(["D01:05", "D1:5", "junk", "D3:1 D3:2"]) == ["D1:5", "D3:1", "D3:2"]
    assert parse_session_date("10:04 am on 19 January, 2024").day == 19
    with pytest.raises(FileNotFoundError, match="locomo"):
        load_locomo("/no/such/file.json")


def test_retrieval_eval_end_to_end(mini_file, tmp_path, capsys):
    report = main(
        [
            "--data",
            str(mini_file),
            "--embedder",
            "test",
            "--out",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "r.png"),
        ]
    )
    assert (tmp_path / "r.png").stat().st_size > 0
    printed = capsys.readouterr()  # a long run says on stderr what it is doing (issue 11)
    assert "indexing 4 turns of 1 conversations" in printed.err and "with the hybrid recipe" in printed.err
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["turns"] == 4
    for recipe in ("keyword", "dense", "hybrid"):
        result = saved["results"][recipe]
        assert result["questions"]["overall"] == 3  # category 5 and evidence-less questions skipped
        assert result["skipped_without_evidence"] == 1
        assert set(result["recall"]["overall"]) == {"R@5", "R@10", "R@20"}
    assert report["results"]["keyword"]["recall"]["single-hop"]["R@5"] == 1.0
    assert "| recipe" in printed.out


@pytest.mark.skipif(not Path(DEFAULT_DATA).exists(), reason="LoCoMo development split not present")
def test_the_development_split_loads():
    conversations = load_locomo(DEFAULT_DATA)
    assert [c.sample_id for c in conversations] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    assert sum(len(c.turns) for c in conversations) == 2760
    assert sum(len(c.questions) for c in conversations) == 999


def test_observation_mode_stores_the_authors_facts_through_the_write_path(tmp_path, capsys):
    """--facts observation: each observation becomes a fact memory written by the write path
    (subject entity, date, provenance by word overlap); a fact hit counts for its source turns."""
    from dspy_memory import Memory

    data = json.loads(json.dumps(MINI))
    data[0]["observation"] = {
        "session_1_observation": {
            "Caroline": [["Caroline went to an LGBTQ support group on 7 May 2023.", "D1:1"]],
            "Melanie": [
                ["Melanie shared a photo of a sunset over a lake.", "D1:2"],
                ["An observation whose evidence is not a turn of its session.", "D2:1"],
            ],
        },
        "session_2_observation": {
            "Melanie": [["Melanie painted a sunrise in 2022.", "D02:01"]],
            "Caroline": [["Caroline is researching adoption agencies.", ["D2:2"]], ["", "D2:2"], "junk"],
        },
    }
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(data))
    db = str(tmp_path / "facts.db")
    report = main(
        [
            "--data",
            str(path),
            "--embedder",
            "test",
            "--facts",
            "observation",
            "--db",
            db,
            "--recipes",
            "keyword",
        ]
        + ["--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")]
    )
    assert report["memories"] == 4 and report["observation_facts_given"] == 4
    assert "stored as 4 observation facts" in capsys.readouterr().out
    with Memory(db, embedder="test") as memory:
        facts = {m.content: m for m in memory.get_all(user_id="conv-mini")}
        assert {m.kind for m in facts.values()} == {"fact"}
        fact = facts["Caroline is researching adoption agencies."]
        assert fact.valid_at.date().isoformat() == "2023-06-09"
        [hit] = memory.search("adoption agencies", user_id="conv-mini", k=1, recipe="keyword")
        assert [p.metadata["dia_id"] for p in hit.provenance] == ["D2:2"]
        edges = memory.graph("Melanie", user_id="conv-mini").memories
        assert sorted(edge.content for edge in edges) == [
            "Melanie painted a sunrise in 2022.",
            "Melanie shared a photo of a sunset over a lake.",
        ]
    # "What is Caroline researching?" is answered by the fact, which stands for turn D2:2.
    assert report["results"]["keyword"]["recall"]["single-hop"]["R@5"] == 1.0


def three_conversations(tmp_path):
    """The mini conversation three times over, under three sample ids."""
    records = []
    for name in ("conv-a", "conv-b", "conv-c"):
        record = json.loads(json.dumps(MINI[0]))
        record["sample_id"] = name
        records.append(record)
    path = tmp_path / "three.json"
    path.write_text(json.dumps(records))
    return path


def files_opened(module, monkeypatch):
    """The names of the files `module` opens a Memory on, in order (its Memory, recorded)."""
    opened = []

    class Recorded(module.Memory):
        def __init__(self, path, **options):
            opened.append(Path(path).name)
            super().__init__(path, **options)

    monkeypatch.setattr(module, "Memory", Recorded)
    return opened


def test_cv_holds_out_each_conversation_and_reports_it_per_conversation_and_category(
    tmp_path, capsys, monkeypatch
):
    import evals.locomo_cv as cv

    monkeypatch.setattr(cv, "WINDOWS", [(0, 0), (2, 1)])
    monkeypatch.setattr(cv, "CONTEXT_WEIGHTS", [0.5])
    monkeypatch.setattr(cv, "FUSIONS", cv.FUSIONS[:2])
    monkeypatch.setattr(cv, "CANDIDATES", (30,))
    monkeypatch.setattr(cv, "AGREEMENTS", cv.AGREEMENTS[:2])
    monkeypatch.setattr(cv, "BOOSTS", cv.BOOSTS[:2])
    monkeypatch.setattr(cv, "SAID_TOGETHER", cv.SAID_TOGETHER[:2])
    monkeypatch.setattr(cv, "SPEAKERS", cv.SPEAKERS[:2])
    report = main(
        ["--data", str(three_conversations(tmp_path)), "--split", "all", "--embedder", "test", "--cv"]
        + ["--out", str(tmp_path / "cv.json"), "--plot", str(tmp_path / "cv.png")]
    )
    hybrid = report["recipes"]["hybrid"]
    assert set(hybrid["folds"]) == {"conv-a", "conv-b", "conv-c"}
    assert hybrid["cv"]["questions"]["overall"] == 9  # three held-out questions a fold, pooled
    assert set(hybrid["cv"]["recall"]) == {"overall", "temporal", "single-hop"}
    # keyword's: two windows, two said-together weights, two boosts, two speaker weights; then two
    # fusions x two agreements
    assert hybrid["settings_tried"] == (2 + 2 + 2 + 2) + 2 * 2
    assert report["recipes"]["dense"]["settings_tried"] == 1 + 2 + 2 + 2
    assert "speaker_weight 0.0" in report["anchor"] and "candidates 30" in report["anchor"]
    printed = capsys.readouterr().out
    assert "held out" in printed and "hybrid >= both" in printed and "sR@10" in printed
    against = report["hybrid_against"]["keyword"]
    assert against["interval"][0] <= against["difference"] <= against["interval"][1]
    assert against["questions_better"] + against["questions_worse"] <= 9 and "95% interval" in printed
    assert (tmp_path / "cv.png").stat().st_size > 0


def test_cv_can_index_each_conversation_in_a_file_of_its_own(tmp_path, capsys, monkeypatch):
    import evals.locomo_cv as cv

    for name, value in (("WINDOWS", [(2, 1)]), ("CONTEXT_WEIGHTS", [0.5]), ("FUSIONS", cv.FUSIONS[:1])):
        monkeypatch.setattr(cv, name, value)
    for name in ("AGREEMENTS", "BOOSTS", "SAID_TOGETHER", "SPEAKERS"):
        monkeypatch.setattr(cv, name, getattr(cv, name)[:1])
    monkeypatch.setattr(cv, "CANDIDATES", (30,))
    opened = files_opened(cv, monkeypatch)
    report = main(
        ["--data", str(three_conversations(tmp_path)), "--split", "all", "--embedder", "test", "--cv"]
        + ["--file-per-conversation", "--out", str(tmp_path / "cv.json"), "--plot", str(tmp_path / "cv.png")]
    )
    assert set(opened) == {"context_2_1_conv-a.db", "context_2_1_conv-b.db", "context_2_1_conv-c.db"}
    assert report["file_per_conversation"] and set(report["recipes"]["hybrid"]["folds"]) == {
        "conv-a",
        "conv-b",
        "conv-c",
    }
    assert "each conversation in a file of its own" in capsys.readouterr().out


def test_a_fold_chooses_on_the_other_conversations_only_and_keeps_the_default_within_the_margin():
    """The setting that is best on the held-out conversation but worst on the others must not
    be chosen for that fold; a default within MARGIN of the best stays."""
    from evals.locomo_cv import MARGIN, choose
    from evals.locomo_retrieval import Answered

    def answered(conversation, recall):
        return Answered(conversation, "single-hop", {10: recall}, {10: recall}, recall)

    default = ((2, 1), (("rrf_k", 10.0),))
    others, held = ((2, 1), (("rrf_k", 5.0),)), ((2, 1), (("rrf_k", 30.0),))
    results = {
        default: [answered("a", 0.5), answered("b", 0.5), answered("held", 0.5)],
        others: [answered("a", 0.9), answered("b", 0.9), answered("held", 0.1)],
        held: [answered("a", 0.2), answered("b", 0.2), answered("held", 1.0)],
    }
    assert choose(list(results), results.__getitem__, {"a", "b"}, margin=MARGIN) == others
    assert choose(list(results), results.__getitem__, {"held"}, margin=MARGIN) == held
    results[others] = [answered("a", 0.5 + MARGIN / 2), answered("b", 0.5 + MARGIN / 2)]
    assert choose(list(results), results.__getitem__, {"a", "b"}, margin=MARGIN) == default
    assert choose(list(results), results.__getitem__, {"a", "b"}) == others  # no margin: the best


def test_hybrid_keeps_every_choice_of_keyword_and_chooses_only_how_dense_joins(monkeypatch):
    """The library has one set of settings for every recipe: a fold's hybrid is its keyword
    search (window, candidates, boosts) plus dense, even where hybrid alone would have chosen
    another window."""
    import evals.locomo_cv as cv
    from evals.locomo_retrieval import Answered

    monkeypatch.setattr(cv, "WINDOWS", [(0, 0), (2, 1)])
    monkeypatch.setattr(cv, "CONTEXT_WEIGHTS", [0.5])
    monkeypatch.setattr(
        cv,
        "FUSIONS",
        [{"fusion": "rrf", "rrf_k": 10.0, "dense_weight": 0.7}, {"fusion": "convex", "dense_weight": 0.5}],
    )
    for name in ("AGREEMENTS", "BOOSTS", "SAID_TOGETHER", "SPEAKERS"):
        monkeypatch.setattr(cv, name, getattr(cv, name)[:1])
    monkeypatch.setattr(cv, "CANDIDATES", (30,))

    class Trials:
        def measure(self, recipe, setting):
            window, read = setting
            recall = {"keyword": 0.8 if window == (2, 1) else 0.5}.get(recipe, 0.0)
            if recipe == "hybrid":  # hybrid alone would take window 0,0 and convex
                recall = (0.9 if window == (0, 0) else 0.7) + (
                    0.05 if dict(read)["fusion"] == "convex" else 0
                )
            return [Answered("a", "single-hop", {10: recall}, {10: recall}, recall)]

    keyword = cv.select(Trials(), "keyword", {"a"})
    hybrid = cv.select(Trials(), "hybrid", {"a"})
    assert keyword[0] == hybrid[0] == (2, 1)
    shared = dict(hybrid[1])
    assert shared.pop("fusion") == "convex" and shared.pop("dense_weight") == 0.5
    assert shared.pop("agreement_depth") == 0 and shared == dict(keyword[1])
    assert cv.settings_tried("hybrid") == cv.settings_tried("keyword") + 2


def test_each_stage_starts_from_settings_no_cross_validation_chose():
    """A fold must not be anchored on the library's defaults, which the procedure chose with
    that fold's held-out conversation among the five: every mechanism the CV added starts off."""
    from dspy_memory.config import RetrievalConfig
    from evals.locomo_cv import ANCHOR, is_anchor, setting_of

    assert ANCHOR.agreement_depth == 0 and ANCHOR.said_together_weight == 0 and ANCHOR.speaker_weight == 0
    assert ANCHOR.candidates == 30  # the candidates before the CV widened them
    assert is_anchor(setting_of(ANCHOR)) and not is_anchor(setting_of(RetrievalConfig()))
    # Every setting a stage chooses is named, none taken from the library's defaults (which
    # move with what the procedure chooses on all five).
    window, read = setting_of(ANCHOR)
    named = {"turn_context_before", "turn_context_after", *dict(read)}
    assert named <= ANCHOR.model_fields_set, named - ANCHOR.model_fields_set


def test_a_trial_takes_every_setting_it_does_not_name_from_the_anchor_not_the_library():
    """Stage 1 tries fusions before stage 2 chooses the candidates: its trials must search with
    the anchor's candidates and boosts, not with defaults chosen on every conversation."""
    from dspy_memory.config import RetrievalConfig
    from evals.locomo_cv import ANCHOR, retrieval_of

    retrieval = retrieval_of(((3, 1), (("fusion", "convex"), ("dense_weight", 0.5))))
    assert retrieval["fusion"] == "convex" and retrieval["dense_weight"] == 0.5
    assert (retrieval["turn_context_before"], retrieval["turn_context_after"]) == (3, 1)
    for name in (
        "candidates",
        "agreement_depth",
        "said_together_weight",
        "speaker_weight",
        "temporal_weight",
    ):
        assert retrieval[name] == getattr(ANCHOR, name)
    assert retrieval["candidates"] != RetrievalConfig().candidates
    assert retrieval_of(((2, 1), (("candidates", 60),)))["candidates"] == 60


def test_file_per_conversation_keeps_each_conversation_alone_in_its_file(tmp_path, monkeypatch):
    """FTS5's BM25 statistics are file-wide: to compare SQLite with PostgreSQL's per-user
    statistics, each conversation is indexed and searched in a file of its own."""
    import evals.locomo_retrieval as retrieval

    opened = files_opened(retrieval, monkeypatch)
    argv = ["--data", str(three_conversations(tmp_path)), "--split", "all", "--embedder", "test"]
    argv += ["--recipes", "keyword", "--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")]
    shared = main(argv)
    alone = main([*argv, "--file-per-conversation"])
    assert set(opened) == {"locomo.db", "conv-a.db", "conv-b.db", "conv-c.db"}
    assert alone["file_per_conversation"] and not shared["file_per_conversation"]
    assert alone["memories"] == shared["memories"] == alone["turns"]
    assert alone["results"]["keyword"]["questions"] == shared["results"]["keyword"]["questions"]
    assert set(alone["results"]["keyword"]["per_conversation"]) == {"conv-a", "conv-b", "conv-c"}
    with pytest.raises(SystemExit):
        main([*argv, "--file-per-conversation", "--db", str(tmp_path / "one.db")])


def test_session_recall_counts_the_evidence_sessions_among_the_hits_sessions(mini_file, tmp_path):
    from dspy_memory import Memory
    from evals.locomo_retrieval import ask, index_conversation

    [conversation] = load_locomo(mini_file)
    with Memory(str(tmp_path / "m.db"), embedder="test") as memory:
        index_conversation(memory, conversation)
        answered, skipped = ask(memory, conversation, "keyword", ks=(1, 4))
    assert skipped == 1
    by_question = dict(zip([q.question for q in conversation.questions[:3]], answered))
    sunrise = by_question["When did Melanie paint a sunrise?"]  # evidence in sessions 1 and 2
    assert sunrise.session_recall == {1: 0.5, 4: 1.0} and sunrise.recall == {1: 0.5, 4: 1.0}
    researching = by_question["What is Caroline researching?"]
    assert researching.session_recall[1] == researching.recall[1] == 1.0


def test_retention_weights_are_measured_on_conversations_lived_in_time(mini_file, tmp_path, capsys):
    from dspy_memory import Memory
    from dspy_memory.util.timeutil import now_db

    db = tmp_path / "lived.db"
    argv = ["--data", str(mini_file), "--embedder", "test", "--db", str(db), "--retention-weights", "0,0.5"]
    report = main([*argv, "--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])
    assert report["weights"] == [0.0, 0.5] and set(report["results"]) == {"0.0", "0.5"}
    assert report["results"]["0.0"]["questions"]["overall"] == 3
    assert "| retention_weight" in capsys.readouterr().out
    assert now_db() > "2026"  # the real clock is back
    with Memory(db, embedder="test") as memory:
        stored = {r.content.split(": ", 1)[-1][:20]: r for r in memory.get_all(user_id="conv-mini")}
    # Each turn was stored when its session took place, so its retention reflects its age.
    assert f"{stored['I went to an LGBTQ s'].created_at:%Y-%m-%d}" == "2023-05-08"
    assert f"{stored['I am researching ado'].created_at:%Y-%m-%d}" == "2023-06-09"


def test_the_paired_difference_counts_questions_and_claims_a_gain_only_when_the_interval_excludes_zero():
    from evals.locomo_cv import paired
    from evals.locomo_retrieval import Answered

    def answered(recalls, conversation="a"):
        return [Answered(conversation, "single-hop", {10: r}, {10: r}, r) for r in recalls]

    better = paired(answered([1.0] * 30), answered([0.5] * 30))
    assert better["difference"] == 0.5 and better["verdict"] == "gain" and better["questions_better"] == 30
    mixed = paired(answered([1.0, 0.0] * 15), answered([0.0, 1.0] * 15))
    assert mixed["verdict"] == "no difference shown" and mixed["questions_worse"] == 15
    with pytest.raises(ValueError, match="differ"):
        paired(answered([1.0]), answered([1.0], conversation="b"))


def test_set_changes_a_retrieval_setting_of_the_run_and_names_a_bad_one(
    mini_file, tmp_path, capsys, monkeypatch
):
    import evals.locomo_retrieval as module

    opened = []

    class Spy(module.Memory):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self.config.retrieval)

    monkeypatch.setattr(module, "Memory", Spy)
    argv = ["--data", str(mini_file), "--embedder", "test", "--recipes", "hybrid"]
    outputs = ["--out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")]
    report = main([*argv, "--set", "candidates=7", "--set", "said_together_weight=0", *outputs])
    assert report["retrieval_settings"] == {"candidates": "7", "said_together_weight": "0"}
    assert opened and all(r.candidates == 7 and r.said_together_weight == 0 for r in opened)
    with pytest.raises(SystemExit):
        main([*argv, "--set", "candidates", *outputs])
    assert "expected NAME=VALUE" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no_such_setting"):
        main([*argv, "--set", "no_such_setting=1", *outputs])
