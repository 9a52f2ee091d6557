"""LongMemEval retrieval as the benchmark's own code scores it (xiaowu0162/LongMemEval at
9e0b455f, src/retrieval/eval_utils.py and run_retrieval.py). Every expected number below is
worked out by hand from those formulas; the comments show the arithmetic, and where the
textbook discount or the old all-turns corpus would give a different number, that one too."""

from __future__ import annotations

import json
import math

import pytest

from evals.longmemeval import (
    dcg,
    evaluate_retrieval,
    evaluate_retrieval_turn2session,
    evidence,
    load_longmemeval,
    main,
    parse_date,
    skip_reason,
    turn_corpus,
)


def test_dcg_does_not_discount_the_second_position():
    # eval_utils.py:8: rel_1 + sum_{p>=2} rel_p / log2(p).
    assert dcg([0, 1], 2) == 1.0  # 1 / log2(2); textbook 1 / log2(3) = 0.631
    assert dcg([0, 0, 1], 3) == pytest.approx(1 / math.log2(3))  # 0.631; textbook 1/log2(4) = 0.5
    assert dcg([1, 1, 1, 1], 3) == pytest.approx(1 + 1 + 1 / math.log2(3))  # cut at k = 3: 2.631
    assert dcg([], 5) == 0.0


def test_turn_level_recall_and_ndcg():
    corpus = ["x_1", "answer_a_1", "y_1", "answer_b_2", "z_1"]
    correct = ["answer_a_1", "answer_b_2"]
    ranking = [2, 1, 0, 3, 4]  # y_1, answer_a_1, x_1, answer_b_2, z_1 -> relevances 0 1 0 1 0
    at3 = evaluate_retrieval(ranking, correct, corpus, 3)
    # top 3 holds answer_a_1 only: any 1, all 0.
    # DCG@3 = 0 + 1/log2(2) + 0 = 1; ideal 1 1 0: 1 + 1/log2(2) = 2; nDCG = 0.5
    # (the textbook discount: (1/log2(3)) / (1 + 1/log2(3)) = 0.387).
    assert at3 == {"recall_any": 1.0, "recall_all": 0.0, "ndcg_any": 0.5}
    at4 = evaluate_retrieval(ranking, correct, corpus, 4)
    # DCG@4 = 1 + 1/log2(4) = 1.5; ideal 1 1 0 0 = 2; nDCG = 0.75 (textbook: 0.624).
    assert at4 == {"recall_any": 1.0, "recall_all": 1.0, "ndcg_any": 0.75}
    nothing = evaluate_retrieval(ranking, [], corpus, 3)
    # No evidence: any() of nothing is 0, all() of nothing is 1, an ideal DCG of 0 gives 0.
    assert nothing == {"recall_any": 0.0, "recall_all": 1.0, "ndcg_any": 0.0}


HAYSTACK = {
    "question_id": "q1",
    "question_type": "single-session-user",
    "question": "What colour is my bicycle?",
    "haystack_session_ids": ["sharegpt_q_0", "answer_k1", "ultrachat_7"],
    "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 11:00"],
    "haystack_sessions": [
        [
            {"role": "user", "content": "Suggest a pasta recipe."},
            {"role": "assistant", "content": "Mushroom tagliatelle."},
            {"role": "user", "content": "Without cream, please."},
        ],
        [
            {"role": "user", "content": "My bicycle is teal and I ride it daily.", "has_answer": True},
            {"role": "assistant", "content": "Your teal bicycle sounds lovely.", "has_answer": True},
            {"role": "user", "content": "Which lock is best?", "has_answer": False},
        ],
        [{"role": "user", "content": "How do tides work?"}, {"role": "assistant", "content": "The moon."}],
    ],
    "answer_session_ids": ["answer_k1"],
}


def test_the_corpus_is_the_user_turns_and_evidence_is_their_has_answer_ids():
    corpus = turn_corpus(HAYSTACK)
    # run_retrieval.py:211-225: user turns only, numbered by their place among all turns; the
    # answer session's user turn without has_answer becomes "noans". The old runner indexed
    # all 7 turns as sharegpt_q_0_1..3, answer_k1_1..3, ultrachat_7_1..2.
    assert [turn.corpus_id for turn in corpus] == [
        "sharegpt_q_0_1",
        "sharegpt_q_0_3",
        "answer_k1_1",
        "noans_k1_3",
        "ultrachat_7_1",
    ]
    # The assistant's has_answer turn is not in the corpus, so it is not evidence.
    assert evidence(corpus) == ["answer_k1_1"]


def test_session_level_widens_k_and_a_noans_turn_does_not_find_the_answer_session():
    corpus = [turn.corpus_id for turn in turn_corpus(HAYSTACK)]
    # Sessions of the corpus: sharegpt_q_0 sharegpt_q_0 answer_k1 noans_k1 ultrachat_7.
    ranking = [3, 0, 1, 2, 4]  # noans_k1_3, sharegpt_q_0_1, sharegpt_q_0_3, answer_k1_1, ultrachat_7_1
    at2 = evaluate_retrieval_turn2session(ranking, ["answer_k1_1"], corpus, 2)
    # Top 2 turns span 2 sessions (noans_k1, sharegpt_q_0): k stays 2. The answer session's
    # other user turn maps to "noans_k1", so nothing is found (mapping turns by their session
    # alone, as the old runner did, would count it: recall 1.0).
    assert at2 == {"recall_any": 0.0, "recall_all": 0.0, "ndcg_any": 0.0}
    at3 = evaluate_retrieval_turn2session(ranking, ["answer_k1_1"], corpus, 3)
    # Top 3 turns span 2 sessions -> k 4 (noans_k1, sharegpt_q_0, answer_k1). Relevances
    # 0 0 0 1: DCG = 1/log2(4) = 0.5; ideal: one relevant item first = 1; nDCG 0.5
    # (textbook: 1/log2(5) = 0.431).
    assert at3 == {"recall_any": 1.0, "recall_all": 1.0, "ndcg_any": 0.5}
    at5 = evaluate_retrieval_turn2session(ranking, ["answer_k1_1"], corpus, 5)
    # Only 4 distinct sessions exist: k grows past the corpus (6) and everything is in.
    assert at5 == {"recall_any": 1.0, "recall_all": 1.0, "ndcg_any": 0.5}
    # The same ranking at turn level: answer_k1_1 is 4th.
    assert evaluate_retrieval(ranking, ["answer_k1_1"], corpus, 3)["recall_any"] == 0.0
    assert evaluate_retrieval(ranking, ["answer_k1_1"], corpus, 4)["ndcg_any"] == 0.5


def test_abstention_and_questions_without_user_evidence_are_skipped():
    assert skip_reason(HAYSTACK) is None
    assert skip_reason({**HAYSTACK, "question_id": "gpt4_2655b836_abs"}) == "abstention"
    assistant_only = json.loads(json.dumps(HAYSTACK))
    assistant_only["haystack_sessions"][1][0]["has_answer"] = False
    assert skip_reason(assistant_only) == "no evidence turn from the user"


def test_runner_indexes_user_turns_ranks_them_and_skips_what_the_benchmark_skips(tmp_path, capsys):
    # The question's words appear in one USER turn only; the assistant turns repeat them, so
    # indexing assistant turns would let them take the top places (they are not in the corpus).
    data = [
        HAYSTACK,
        {**HAYSTACK, "question_id": "q1_abs"},
        {
            **HAYSTACK,
            "question_id": "q2",
            "question_type": "knowledge-update",
            "question": "Which lock is best for my teal bicycle?",
        },
    ]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "lme-out.json"
    results = main(
        ["--data", str(path), "--embedder", "test:128", "--out", str(out), "--plot", str(tmp_path / "l.png")]
    )
    assert results["skipped"] == {"abstention": ["q1_abs"]}
    rows = {row["question_id"]: row for row in results["rows"]}
    assert set(rows) == {"q1", "q2"} and rows["q1"]["turns"] == 5
    # "bicycle" is in one user turn only, so any search ranks it first.
    assert rows["q1"]["turn_recall_any@1"] == 1.0 and rows["q1"]["session_recall_any@1"] == 1.0
    assert results["summary"]["overall"]["questions"] == 2
    printed = capsys.readouterr().out
    assert "1 abstention" in printed and "session_recall_all@5" in printed
    assert out.is_file() and out.with_suffix(".md").is_file() and (tmp_path / "l.png").is_file()


def test_loader_and_dates(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps([HAYSTACK]))
    assert [i["question_id"] for i in load_longmemeval(path)] == ["q1"]
    assert parse_date(HAYSTACK["haystack_dates"][1]).isoformat() == "2023-05-02T10:00:00+00:00"
    bad = tmp_path / "bad.json"
    bad.write_text('[{"question": "x"}]')
    with pytest.raises(ValueError, match="LongMemEval format"):
        load_longmemeval(bad)
