"""FMV score, consensus selection and the pointwise target (pure functions, no execution)."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concord.consensus.fmv import (
    execution_vectors,
    fmv_scores,
    fmv_select,
    functional_clusters,
    pointwise_target,
    valid_mask,
)
from concord.execution import Outcome


def ok(x):
    return Outcome("ok", x)


ERR = Outcome("error", None, "boom")
TO = Outcome("timeout", None, "slow")


def test_figure1_example_invalid_candidates_are_discarded_and_the_medoid_wins():
    # c1..c5 on 3 inputs; c2 crashes, so it neither scores nor votes.
    outcomes = [
        [ok("1"), ok("4"), ok("9")],   # c1: agrees with c3 everywhere, with c4 twice, c5 once
        [ok("1"), ERR, ok("9")],       # c2: invalid
        [ok("1"), ok("4"), ok("9")],   # c3
        [ok("1"), ok("4"), ok("8")],   # c4
        [ok("0"), ok("4"), ok("7")],   # c5
    ]
    scores = fmv_scores(outcomes)
    assert scores[1] == -np.inf
    # S(c1) = 3 (c3) + 2 (c4) + 1 (c5) = 6; S(c3) = 6; S(c4) = 2 + 2 + 1 = 5; S(c5) = 1 + 1 + 1 = 3
    assert scores.tolist() == [6.0, -np.inf, 6.0, 5.0, 3.0]
    assert fmv_select(outcomes) == 0  # tie between c1 and c3 goes to the first
    assert valid_mask(outcomes).tolist() == [True, False, True, True, True]


def test_soft_agreement_picks_partial_majority():
    # No two candidates agree everywhere, but candidate 1 shares most outputs with the others.
    outcomes = [
        [ok("a"), ok("b"), ok("x")],
        [ok("a"), ok("b"), ok("c")],
        [ok("y"), ok("b"), ok("c")],
        [ok("a"), ok("z"), ok("c")],
    ]
    assert fmv_select(outcomes) == 1


def test_pointwise_target_is_the_per_input_mode_over_all_produced_outputs():
    outcomes = [
        [ok("a"), ERR, ok("x")],
        [ok("a"), ok("b"), TO],
        [ok("c"), ok("b"), ok("y")],
        [ok("c"), ok("d"), ok("y")],
        [ERR, ERR, ERR],
    ]
    # input 0: a,a,c,c -> tie, first seen "a"; input 1: b,b,d -> "b"; input 2: x,y,y -> "y"
    assert pointwise_target(outcomes) == ["a", "b", "y"]
    assert pointwise_target([[ERR, ok("q")]]) == [None, "q"]
    assert pointwise_target([]) == []


def test_no_valid_candidate_gives_no_consensus():
    assert fmv_select([[ERR, ok("1")], [ok("1"), TO]]) is None
    assert fmv_select([]) is None
    assert fmv_select([[ok("only")]]) == 0


def test_cells_may_be_strings_mappings_or_outcomes():
    mixed = [["1", None], [{"status": "ok", "output": "1"}, {"status": "ok", "output": "2"}], [ok("1"), ok("2")]]
    assert execution_vectors(mixed) == [["1", None], ["1", "2"], ["1", "2"]]
    assert fmv_select(mixed) == 1
    assert functional_clusters(mixed).tolist() == [-1, 0, 0]


def test_malformed_input_is_rejected_with_a_clear_error():
    with pytest.raises(ValueError, match="row lengths differ"):
        fmv_scores([[ok("1")], [ok("1"), ok("2")]])
    with pytest.raises(ValueError, match="K = 0"):
        fmv_scores([[], []])
    with pytest.raises(TypeError, match="status/.output"):
        fmv_scores([[3.5]])
    with pytest.raises(ValueError, match="string output"):
        fmv_scores([[{"status": "ok", "output": 3}]])


outputs = st.one_of(st.none(), st.sampled_from(["0", "1", "2"]))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.lists(st.lists(outputs, min_size=k, max_size=k), min_size=1, max_size=7)))
def test_scores_equal_the_pairwise_definition(matrix):
    scores = fmv_scores(matrix)
    valid = [all(o is not None for o in row) for row in matrix]
    for i, row in enumerate(matrix):
        if not valid[i]:
            assert scores[i] == -np.inf
            continue
        expected = sum(
            sum(a == b for a, b in zip(row, other)) for j, other in enumerate(matrix) if j != i and valid[j]
        )
        assert scores[i] == expected
    selected = fmv_select(matrix)
    if any(valid):
        assert selected == min(i for i in range(len(matrix)) if valid[i] and scores[i] == max(scores))
    else:
        assert selected is None
    # Permuting candidates permutes scores.
    perm = list(reversed(range(len(matrix))))
    assert fmv_scores([matrix[p] for p in perm]).tolist() == [scores[p] for p in perm]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b"]), min_size=3, max_size=3), min_size=1, max_size=6))
def test_pointwise_target_matches_brute_force_mode(matrix):
    target = pointwise_target(matrix)
    for k, y in enumerate(target):
        column = [row[k] for row in matrix]
        best = max(column.count(v) for v in set(column))
        assert column.count(y) == best
        assert y == next(v for v in column if column.count(v) == best)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4).flatmap(lambda k: st.lists(st.lists(outputs, min_size=k, max_size=k), min_size=2, max_size=8)),
       st.randoms(use_true_random=False))
def test_codes_of_the_full_set_select_like_the_subset_itself(matrix, rnd):
    from concord.consensus.fmv import encode_outputs, fmv_select_codes

    codes = encode_outputs(matrix)
    idx = sorted(rnd.sample(range(len(matrix)), rnd.randint(1, len(matrix))))
    assert fmv_select_codes(codes[idx]) == fmv_select([matrix[i] for i in idx])
