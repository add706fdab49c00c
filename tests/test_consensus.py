"""The consensus operators' interface, read-outs, edge cases, validation and batching."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer

from concord.consensus import METHODS, ConsensusResult, score_group, score_groups
from concord.consensus.graph import (
    affinity,
    calibrate,
    char_ngram_tfidf,
    node_weights,
    reasoning_kernel,
    replicator_dynamics,
)

ROOT = Path(__file__).resolve().parents[1]

ANSWERS = ["12", "12.0", "7", None, "7", "7", r"\frac{24}{2}", "3"]
TEXTS = [
    "We compute 3 * 4 = 12, so the answer is 12.",
    "Three times four is 12.0 after checking.",
    "Adding 3 and 4 gives 7.",
    "I am not sure what the question asks.",
    "So 3 + 4 = 7, the answer is 7.",
    "Thus we get 7.",
    "24 / 2 = 12, hence the answer is 12.",
    "It is 3.",
]
CONFIDENCES = [-0.2, -0.25, -0.9, -0.05, -0.8, -1.0, -0.3, -2.0]


def _score(method, **kw):
    return score_group(method, ANSWERS, TEXTS, CONFIDENCES, **kw)


# ---------------------------------------------------------------------------------------------
# Interface and read-outs
# ---------------------------------------------------------------------------------------------


def test_methods():
    assert METHODS == ("majority", "ec", "cisc", "core")


@pytest.mark.parametrize("method", METHODS)
def test_result_shape_and_ranges(method):
    r = _score(method)
    assert isinstance(r, ConsensusResult) and r.method == method
    assert isinstance(r.rewards, np.ndarray) and r.rewards.dtype == float and r.rewards.shape == (8,)
    assert isinstance(r.mass, np.ndarray) and r.mass.shape == (8,)
    assert isinstance(r.gate, float) and 0.0 <= r.gate <= 1.0
    assert np.all((r.rewards >= 0) & (r.rewards <= 1)) and r.rewards.max() == pytest.approx(1.0)
    assert r.mass.sum() == pytest.approx(1.0) and np.all(r.mass >= 0)
    assert r.classes.tolist() == [0, 0, 1, -1, 1, 1, 0, 2]
    assert r.rewards[3] == 0 and r.mass[3] == 0  # the roll-out without an answer
    assert r.label in ("12", "7")
    assert r.as_dict()["rewards"] == r.rewards.tolist()


def test_majority_plurality_ties_and_binary_rewards():
    r = _score("majority")
    assert r.label == "12"  # 3 votes each for 12 and 7: the first seen wins
    assert r.rewards.tolist() == [1, 1, 0, 0, 0, 0, 1, 0]
    assert r.gate == 1.0
    np.testing.assert_allclose(r.mass, [1 / 7] * 3 + [0] + [1 / 7] * 4)
    r = score_group("majority", ["5", "6", "6", None])
    assert r.label == "6" and r.rewards.tolist() == [0, 1, 1, 0]


def test_cisc_weights_votes_by_confidence():
    answers = ["1", "1", "1", "2", "2"]
    flat = score_group("cisc", answers, confidences=[-1.0] * 5)
    assert flat.label == "1"
    np.testing.assert_allclose(flat.mass, 0.2)
    confident = score_group("cisc", answers, confidences=[-1.0, -1.0, -1.0, -0.1, -0.1], tau=0.25)
    assert confident.label == "2" and confident.rewards.tolist() == [0, 0, 0, 1, 1] and confident.gate == 1.0
    w = node_weights(np.array([-1.0, -1.0, -1.0, -0.1, -0.1]), 0.25)
    np.testing.assert_allclose(confident.mass, w / w.sum())


def test_ec_is_core_with_uniform_confidence():
    ec = _score("ec")
    core_flat = score_group("core", ANSWERS, TEXTS, [-0.5] * 8)
    np.testing.assert_allclose(ec.mass, core_flat.mass)
    np.testing.assert_allclose(ec.rewards, core_flat.rewards)
    assert ec.label == core_flat.label and ec.gate == pytest.approx(core_flat.gate)


def test_core_readouts_follow_equation_4():
    r = _score("core", kappa=0.1, tau=0.25, alpha=0.1)
    answered = np.flatnonzero(r.classes >= 0)
    a = affinity(r.classes[answered], [TEXTS[i] for i in answered], 0.1)
    a_cal = calibrate(a, node_weights(np.array(CONFIDENCES)[answered], 0.25))
    x = replicator_dynamics(a_cal, alpha=0.1).x
    np.testing.assert_allclose(r.mass[answered], x)
    support = a @ x  # the uncalibrated A: confidence already shaped x*
    np.testing.assert_allclose(r.rewards[answered], support / support.max())
    assert r.gate == pytest.approx(x @ a @ x)
    assert r.support.tolist() == (r.mass > 1 / (10 * 8)).tolist()
    assert 1 <= r.iterations <= 200


def test_confidence_can_overturn_the_plurality_in_core():
    answers = ["7"] * 5 + ["12"] * 3
    texts = ["seven since 3 + 4 = 7"] * 5 + ["twelve since 3 * 4 = 12"] * 3
    assert score_group("core", answers, texts, [-1.0] * 5 + [-0.2] * 3).label == "12"
    assert score_group("ec", answers, texts, [-1.0] * 5 + [-0.2] * 3).label == "7"
    assert score_group("majority", answers).label == "7"


@pytest.mark.parametrize("method", METHODS)
def test_no_answers_at_all(method):
    r = score_group(method, [None, None, None], ["a", "b", "c"], [-0.1, -0.2, -0.3])
    assert r.label is None and r.label_class == -1 and r.gate == 0.0
    assert r.rewards.tolist() == [0, 0, 0] and r.mass.tolist() == [0, 0, 0]


@pytest.mark.parametrize("method", METHODS)
def test_unanswered_rollouts_change_nothing(method):
    """A roll-out without an answer (here extremely confident, as a repetition loop would be)
    gets reward 0, is never the label and leaves everyone else's read-outs unchanged."""
    base = _score(method)
    answers = ANSWERS + [None, None]
    texts = TEXTS + ["loop loop loop loop", "12 12 12 12 12 12"]
    confidences = CONFIDENCES + [-0.0001, float("nan")]
    padded = score_group(method, answers, texts, confidences)
    assert padded.label == base.label and padded.gate == pytest.approx(base.gate)
    np.testing.assert_allclose(padded.rewards[:8], base.rewards, atol=1e-12)
    assert padded.rewards[8:].tolist() == [0, 0]
    if method in ("ec", "core"):
        np.testing.assert_allclose(padded.mass[:8], base.mass, atol=1e-12)


def test_single_and_distinct_answers():
    r = score_group("core", ["5"], ["only one"], [-0.3])
    assert r.label == "5" and r.rewards.tolist() == [0.0] and r.gate == 0.0
    r = score_group("core", ["1", "2", "3"], ["a b c d", "e f g h", "i j k l"], [-0.1, -0.1, -0.1])
    assert r.label == "1" and r.rewards.tolist() == [0, 0, 0] and r.gate == 0.0  # no edges at all
    r = score_group("ec", ["1", "2"], ["aaaa", "bbbb"], alpha=0.0, C=0.0)  # null game: stays put
    np.testing.assert_allclose(r.mass, 0.5)


def test_precomputed_classes_skip_grouping():
    grouped = _score("core")
    given_classes = score_group("core", ANSWERS, TEXTS, CONFIDENCES, classes=grouped.classes)
    np.testing.assert_array_equal(given_classes.rewards, grouped.rewards)
    # Classes are taken as given: declaring "12.0" a different answer changes the result.
    split = score_group("majority", ANSWERS, classes=[0, 3, 1, -1, 1, 1, 0, 2])
    assert split.label == "7"


def test_config_defaults_pass_straight_through():
    schema = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    consensus = {k: v["default"] for k, v in schema["properties"]["consensus"]["properties"].items()}
    assert consensus == {"kappa": 0.1, "tau": 0.25, "alpha": 0.1, "C": None, "eps": 1e-6, "t_max": 200}
    for method in METHODS:
        assert score_group(method, ANSWERS, TEXTS, CONFIDENCES, **consensus).label == _score(method).label


def test_deterministic():
    a, b = _score("core"), _score("core")
    np.testing.assert_array_equal(a.rewards, b.rewards)
    np.testing.assert_array_equal(a.mass, b.mass)


def test_batch_equals_single():
    rng = np.random.default_rng(3)
    groups = []
    for q in range(6):
        n = int(rng.integers(1, 12))
        answers = [None if rng.random() < 0.15 else str(int(rng.integers(0, 4))) for _ in range(n)]
        texts = [" ".join(rng.choice(["x", "=", "2", "so", "sum", "root", "hence"], size=20)) for _ in range(n)]
        groups.append({"answers": answers, "texts": texts, "confidences": rng.normal(-0.5, 0.3, size=n).tolist()})
    for method in METHODS:
        batch = score_groups(method, groups)
        for g, r in zip(groups, batch):
            single = score_group(method, **g)
            assert r.label == single.label and r.iterations == single.iterations
            np.testing.assert_allclose(r.rewards, single.rewards, atol=1e-12)
            np.testing.assert_allclose(r.mass, single.mass, atol=1e-12)
            assert r.gate == pytest.approx(single.gate, abs=1e-12)


def test_works_from_another_thread():
    out = []
    answers = [r"\frac{1}{2}", "0.5", r"\sqrt{2}", r"\frac{\sqrt{8}}{2}"]
    t = threading.Thread(target=lambda: out.append(score_group("core", answers, ["a a a"] * 4, [-0.1] * 4)))
    t.start()
    t.join(timeout=60)
    assert out and out[0].classes.tolist() == [0, 0, 1, 1]


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"method": "vote"}, ValueError, "unknown consensus method"),
        ({"answers": []}, ValueError, "at least one roll-out"),
        ({"answers": "12"}, TypeError, "sequence"),
        ({"answers": ["1", 2]}, TypeError, "answer must be str"),
        ({"texts": None}, ValueError, "needs the reasoning texts"),
        ({"texts": ["a", "b"]}, ValueError, "2 texts for 3 answers"),
        ({"confidences": None}, ValueError, "needs confidences"),
        ({"confidences": [-0.1, float("nan"), -0.2]}, ValueError, "non-finite confidence"),
        ({"confidences": [-0.1, -0.2]}, ValueError, "shape"),
        ({"classes": [0, 0]}, ValueError, "classes must be 3 integers"),
        ({"classes": [0, -1, 1]}, ValueError, "-1 exactly where"),
        ({"kappa": 1.5}, ValueError, "kappa"),
        ({"tau": 0}, ValueError, "tau"),
        ({"alpha": 0.2, "C": 0.1}, ValueError, "shift C"),
        ({"eps": -1}, ValueError, "eps"),
        ({"t_max": 0}, ValueError, "t_max"),
        ({"t_max": 2.5}, ValueError, "t_max"),
        ({"kappa": float("nan")}, ValueError, "finite"),
        ({"support_threshold": 1.0}, ValueError, "support_threshold"),
        ({"kapa": 0.1}, TypeError, "kapa"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    call = {"method": "core", "answers": ["1", "1", "2"], "texts": ["a", "b", "c"], "confidences": [-0.1, -0.2, -0.3]}
    call.update(kwargs)
    with pytest.raises(error, match=match):
        score_group(call.pop("method"), call.pop("answers"), call.pop("texts"), call.pop("confidences"), **call)


def test_texts_optional_where_unused():
    assert score_group("core", ["1", "1", "2"], None, [-0.1, -0.2, -0.3], kappa=1.0).label == "1"
    assert score_group("majority", ["1", "2", "2"]).label == "2"
    with pytest.raises(ValueError, match="unknown keys"):
        score_groups("majority", [{"answers": ["1"], "text": ["x"]}])


# ---------------------------------------------------------------------------------------------
# Graph internals
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=8))
def test_tfidf_matches_scikit_learn(texts):
    mine = char_ngram_tfidf(texts)
    try:
        reference = TfidfVectorizer(analyzer="char", ngram_range=(4, 4)).fit_transform(texts).toarray()
    except ValueError:  # scikit-learn refuses an empty vocabulary; we return zero vectors
        assert mine.shape == (len(texts), 0)
        return
    assert mine.shape == reference.shape
    np.testing.assert_allclose(mine, reference, rtol=0, atol=1e-12)


def test_tfidf_matches_scikit_learn_on_reasoning_and_unicode():
    texts = [t * 20 for t in TEXTS] + ["İstanbul ﬁ straße \t\t  😀😀😀😀 x", "abc", ""]
    reference = TfidfVectorizer(analyzer="char", ngram_range=(4, 4)).fit_transform(texts).toarray()
    np.testing.assert_allclose(char_ngram_tfidf(texts), reference, rtol=0, atol=1e-12)


def test_affinity_structure():
    classes = np.array([0, 0, 1, -1, 1, 1, 0, 2])
    kappa = 0.3
    a = affinity(classes, TEXTS, kappa)
    assert np.allclose(a, a.T) and np.all(np.diag(a) == 0)
    same = (classes[:, None] == classes[None, :]) & (classes[:, None] >= 0)
    off = ~np.eye(8, dtype=bool)
    assert np.all(a[~same] == 0)  # block-diagonal over answer classes, no edges for None
    # cos of nonnegative TF-IDF vectors is >= 0, so K_rsn >= 1/2 and A >= kappa + (1 - kappa)/2.
    assert np.all(a[same & off] >= kappa + (1 - kappa) / 2 - 1e-12) and np.all(a <= 1 + 1e-12)
    k = reasoning_kernel(TEXTS)
    np.testing.assert_allclose(a[same & off], (kappa + (1 - kappa) * k)[same & off])
    np.testing.assert_array_equal(affinity(classes, None, 1.0), same & off)


def test_replicator_batch_with_padding_equals_single():
    rng = np.random.default_rng(0)
    mats = []
    for n in (3, 7, 5):
        raw = rng.random((n, n))
        m = (raw + raw.T) / 2
        np.fill_diagonal(m, 0)
        mats.append(m)
    stacked = np.zeros((3, 7, 7))
    mask = np.zeros((3, 7), dtype=bool)
    for b, m in enumerate(mats):
        stacked[b, : len(m), : len(m)] = m
        mask[b, : len(m)] = True
    batch = replicator_dynamics(stacked, mask)
    for b, m in enumerate(mats):
        single = replicator_dynamics(m)
        np.testing.assert_allclose(batch.x[b, : len(m)], single.x, atol=1e-14)
        assert np.all(batch.x[b, len(m) :] == 0)
        assert batch.iterations[b] == single.iterations and batch.converged[b] == single.converged
        assert single.x.sum() == pytest.approx(1.0)


def test_replicator_validation():
    with pytest.raises(ValueError, match="nonnegative"):
        replicator_dynamics(-np.ones((2, 2)))
    with pytest.raises(ValueError, match="alpha <= C"):
        replicator_dynamics(np.ones((2, 2)), alpha=0.5, C=0.1)
    with pytest.raises(ValueError, match="shape"):
        replicator_dynamics(np.ones((2, 3)))


def test_the_four_arms_are_the_graph_x_confidence_factorial_and_typos_are_named():
    from concord.consensus import CONSENSUS_METHODS
    from concord.registry import UnknownNameError

    factors = {m: (CONSENSUS_METHODS.get(m).graph, CONSENSUS_METHODS.get(m).confidence) for m in METHODS}
    assert factors == {"majority": (False, False), "ec": (True, False), "cisc": (False, True), "core": (True, True)}
    with pytest.raises(UnknownNameError, match="unknown consensus method 'cor'. Did you mean: 'core'"):
        score_group("cor", ["1", "1"], ["a", "b"], [0.0, 0.0])
