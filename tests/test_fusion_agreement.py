"""Agreement between the sources: when dense's top hits share little with keyword's, dense
weighs less in hybrid fusion (RetrievalConfig.agreement_depth, read/scores.py)."""

import pytest

from dspy_memory import Memory
from dspy_memory.config import RetrievalConfig
from dspy_memory.embed import HashEmbedder
from dspy_memory.read.retrieval import resolve_recipe
from dspy_memory.read.scores import agreed_weight
from dspy_memory.store.queries import Candidate


def test_the_dense_weight_falls_from_full_to_the_floor_as_the_sources_share_fewer_top_hits():
    weight = dict(depth=4, share=0.5, full=0.7, floor=0.1)
    assert agreed_weight([1, 2, 3, 4], [1, 2, 9, 9], **weight) == pytest.approx(0.7)  # half shared
    assert agreed_weight([1, 2, 3, 4], [1, 2, 3, 4], **weight) == pytest.approx(0.7)
    assert agreed_weight([1, 2, 3, 4], [1, 9, 9, 9], **weight) == pytest.approx(0.4)  # a quarter
    assert agreed_weight([1, 2, 3, 4], [5, 6, 7, 8], **weight) == pytest.approx(0.1)
    # Only the top `depth` count: a row shared below it is no agreement.
    assert agreed_weight([1, 2, 3, 4, 5], [6, 7, 8, 9, 5], **weight) == pytest.approx(0.1)


def test_agreement_off_or_a_floor_above_the_weight_never_changes_or_raises_it():
    assert agreed_weight([1], [2], depth=0, share=0.3, full=0.7, floor=0.1) == 0.7
    assert agreed_weight([1], [2], depth=10, share=0.3, full=0.2, floor=0.5) == 0.2


def candidates(row_ids, top_score):
    return [Candidate(row, top_score / rank, 0.0, 0.5, 1.0, 0, 0.0, 0) for rank, row in enumerate(row_ids, 1)]


@pytest.mark.parametrize("fusion", ["rrf", "convex", "zscore"])
def test_a_dense_list_that_shares_nothing_with_keyword_cannot_outrank_keywords_top_hits(tmp_path, fusion):
    dense = candidates([101, 102, 103, 104, 105], 0.9)
    keyword = candidates([1, 2, 3, 4, 5, 6, 7, 8], 12.0)
    hybrid = resolve_recipe("hybrid")
    fused = {}
    for depth in (0, 5):
        settings = {"fusion": fusion, "agreement_depth": depth, "disagreement_dense_weight": 0.1}
        with Memory(
            str(tmp_path / f"{fusion}{depth}.db"), embedder=HashEmbedder(16), retrieval=settings
        ) as memory:
            fused[depth] = {
                row: d["fused"] for row, d in memory._retriever._fuse(dense, keyword, hybrid).items()
            }
    # Without agreement the first dense hit outranks some of keyword's top eight; with it,
    # dense's weight shrinks from 0.7 to 0.1 and it falls below all eight.
    assert fused[0][101] > min(fused[0][row] for row in keyword_rows(keyword))
    assert fused[5][101] < min(fused[5][row] for row in keyword_rows(keyword))
    assert fused[5][101] < fused[0][101]


def keyword_rows(keyword):
    return [c.row_id for c in keyword]


def test_sources_that_agree_are_fused_exactly_as_without_agreement(tmp_path):
    dense = candidates([1, 2, 101, 102], 0.9)
    keyword = candidates([2, 1, 3, 4], 12.0)
    hybrid = resolve_recipe("hybrid")
    fused = []
    for depth in (0, 4):
        settings = {"agreement_depth": depth, "agreement_share": 0.5}
        with Memory(str(tmp_path / f"{depth}.db"), embedder=HashEmbedder(16), retrieval=settings) as memory:
            fused.append(memory._retriever._fuse(dense, keyword, hybrid))
    assert fused[0] == fused[1]


def test_agreement_settings_out_of_range_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="agreement_share"):
        RetrievalConfig(agreement_share=0)
    with pytest.raises(ValueError, match="agreement_depth"):
        RetrievalConfig(agreement_depth=-1)
    with pytest.raises(ValueError, match="disagreement_dense_weight"):
        RetrievalConfig(disagreement_dense_weight=-0.5)
