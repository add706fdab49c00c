"""Seed 000's propositions and lemmas (section 3.3, Appendices C-G) as property tests on the exact
pipeline: kernels, calibration, the shifted discrete replicator dynamics and the read-outs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from concord.consensus import score_group
from concord.consensus.graph import (
    affinity,
    argmax_first,
    calibrate,
    class_mass,
    clique_flip_gap,
    node_weights,
    replicator_dynamics,
    replicator_step,
)

PROPERTY = settings(max_examples=40, deadline=None)
WORDS = ["let", "x", "=", "3", "so", "we", "get", "\\frac{1}{2}", "hence", "sum", "of", "roots", "is", "7"]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 40)))) for _ in range(n)]


def _rollouts(sizes: list[int], n_none: int, seed: int) -> tuple[list[str | None], np.random.Generator]:
    """Answers: class k has sizes[k] roll-outs answering str(100 + k), shuffled, plus Nones."""
    rng = np.random.default_rng(seed)
    answers: list[str | None] = [str(100 + k) for k, size in enumerate(sizes) for _ in range(size)]
    answers += [None] * n_none
    rng.shuffle(answers)
    return answers, rng


# ---------------------------------------------------------------------------------------------
# Proposition 1: kappa = 1 and uniform confidence reproduce the vote
# ---------------------------------------------------------------------------------------------


@PROPERTY
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6),
    n_none=st.integers(0, 3),
    confidence=st.floats(-3.0, 0.0),
    seed=st.integers(0, 2**16),
)
def test_prop1_majority_is_the_kappa_one_special_case(sizes, n_none, confidence, seed):
    top = max(sizes)
    assume(top >= 2 and sizes.count(top) == 1)  # a unique plurality (the proposition's premise)
    answers, rng = _rollouts(sizes, n_none, seed)
    texts = _texts(rng, len(answers))
    confidences = np.full(len(answers), confidence)
    vote = score_group("majority", answers, texts, confidences)
    assert vote.label == str(100 + sizes.index(top))
    for method in ("ec", "core"):
        result = score_group(method, answers, texts, confidences, kappa=1.0)
        assert result.label == vote.label
        # Binary rewards: the plurality's members share (A x*)_i = max, every other class's mass
        # has decayed to ~0 (the discrete dynamics stop at ||dx|| < eps, not at exactly 0).
        np.testing.assert_allclose(result.rewards, vote.rewards, atol=1e-5)
        winners = vote.rewards == 1
        np.testing.assert_allclose(result.rewards[winners], 1.0, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Proposition 2 in confidence form (7): the flip point of two cliques
# ---------------------------------------------------------------------------------------------


def _two_clique_label(n_star, m, c_star, c_w, delta, *, tau=0.25, alpha=0.1, C=None) -> int:
    """Class (0 = correct, 1 = wrong) the exact pipeline extracts for two cliques whose confidences
    differ by delta nats (correct minus wrong)."""
    classes = np.array([0] * n_star + [1] * m)
    a = np.zeros((n_star + m, n_star + m))
    a[:n_star, :n_star] = c_star
    a[n_star:, n_star:] = c_w
    np.fill_diagonal(a, 0.0)
    confidences = np.where(classes == 0, -0.4 + delta, -0.4)
    eq = replicator_dynamics(calibrate(a, node_weights(confidences, tau)), alpha=alpha, C=C)
    return argmax_first(class_mass(eq.x, classes, 2))


@settings(max_examples=40, deadline=None)
@given(
    n_star=st.integers(2, 12),
    extra=st.integers(1, 28),
    c_star=st.floats(0.3, 1.0),
    c_w=st.floats(0.3, 1.0),
    tau=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
)
def test_prop2_flip_point_in_confidence_form(n_star, extra, c_star, c_w, tau):
    r"""A correct clique (n* roll-outs, base affinity c*, confidence c_conf*) against a wrong clique
    (m > n*, affinity c_w, confidence c_conf_w) flips exactly at w*(n*-1)c* = w_w(m-1)c_w, i.e. at

        delta* = c_conf* - c_conf_w = tau * ln( c_w (m-1) / (c* (n*-1)) ),

    checked within 1e-3 nats on the exact pipeline (alpha = 0.1, C = alpha, eps = 1e-6, T_max = 200).

    Derivation. Calibration with constant weights inside a clique scales its affinity to
    c_a w_a (Prop. 3 with w_i = w_a). Both cliques start uniform at the barycenter and the update
    treats their members symmetrically, so they stay uniform: x_i = s_a / n_a for i in class a.
    Then (A'x)_i = s_a c_a w_a (n_a - 1)/n_a, and with the self-loop and the shift

        (W'x)_i = s_a mu_a + C,   mu_a = (c_a w_a (n_a - 1) - alpha) / n_a,
        x^T W' x = s*^2 mu* + s_w^2 mu_w + C            (s* + s_w = 1).

    Eq. (3) multiplies every x_i of class a by (s_a mu_a + C) / (x^T W' x), hence the mass ratio
    rho = s*/s_w evolves as rho <- rho (s* mu* + C) / (s_w mu_w + C). With C >= alpha both factors
    are positive, so rho grows exactly when s* mu* > s_w mu_w, which then keeps holding (s* only
    grows): the correct class wins iff it wins at t = 0, where s_a(0) = n_a / (n* + m):

        n* mu* > m mu_w  <=>  c* w* (n* - 1) - alpha > c_w w_w (m - 1) - alpha.

    alpha cancels, and C drops out (it only sets the speed): the threshold of Prop. 2 holds
    unchanged on the exact pipeline, with c_a replaced by c_a w_a as in (7). Weights are anchored
    at the most confident roll-out, w_a = exp((c_conf_a - max)/tau); in either order of the two
    confidences w*/w_w = exp(delta/tau), which gives delta* above. (Premise of the argument:
    c_a w_a (n_a - 1) > alpha at the flip, guaranteed here by c >= 0.3 and n* >= 2, so both
    cliques are genuine ones in the sense of Lemma 3.)
    """
    m = n_star + extra
    flip = clique_flip_gap(n_star, m, c_star, c_w, tau)
    assert np.isclose(flip, tau * np.log(c_w * (m - 1) / (c_star * (n_star - 1))))
    assert _two_clique_label(n_star, m, c_star, c_w, flip - 1e-3, tau=tau) == 1
    assert _two_clique_label(n_star, m, c_star, c_w, flip + 1e-3, tau=tau) == 0


@pytest.mark.parametrize("alpha, C", [(0.0, 0.0), (0.1, None), (0.1, 0.5), (0.3, 0.3)])
def test_prop2_flip_point_ignores_alpha_and_shift(alpha, C):
    """alpha = 0 is Prop. 2 as stated; alpha > 0 and any shift C >= alpha move nothing."""
    flip = clique_flip_gap(8, 24, 1.0, 1.0, 0.25)
    assert _two_clique_label(8, 24, 1.0, 1.0, flip - 1e-3, alpha=alpha, C=C) == 1
    assert _two_clique_label(8, 24, 1.0, 1.0, flip + 1e-3, alpha=alpha, C=C) == 0


def test_prop2_without_confidence_needs_coherence_ratio():
    """Equal confidences (delta = 0): the correct clique wins iff c*(n*-1) > c_w(m-1) (eq. 5);
    the paper's 8-vs-24 example needs c* > 23/7 c_w ~ 3.3 c_w."""
    ratio = 23 / 7
    c_w = 0.25
    assert _two_clique_label(8, 24, min(1.0, ratio * c_w * 1.001), c_w, 0.0) == 0
    assert _two_clique_label(8, 24, ratio * c_w * 0.999, c_w, 0.0) == 1


@pytest.mark.parametrize("n_star, m", [(3, 5), (8, 24)])
def test_prop2_flip_through_the_public_api(n_star, m):
    """Same flip through score_group('core'): identical texts within a clique give K_rsn = 1, so
    the base affinity is 1 for any kappa; the flip gap is tau ln((m-1)/(n*-1))."""
    answers = ["7"] * m + ["12"] * n_star
    texts = ["seven because 3 + 4 = 7"] * m + ["twelve because 3 * 4 = 12"] * n_star
    flip = clique_flip_gap(n_star, m, 1.0, 1.0, 0.25)
    for delta, expected in ((flip - 1e-3, "7"), (flip + 1e-3, "12")):
        confidences = [-0.5] * m + [-0.5 + delta] * n_star
        assert score_group("core", answers, texts, confidences).label == expected
    # Without calibration (EC) the plurality stays whatever the confidence gap.
    confidences = [-0.5] * m + [-0.5 + flip + 1e-3] * n_star
    assert score_group("ec", answers, texts, confidences).label == "7"


# ---------------------------------------------------------------------------------------------
# Proposition 3: the calibrated internal score of a clique
# ---------------------------------------------------------------------------------------------


@PROPERTY
@given(
    confidences=st.lists(st.floats(-4.0, 0.0), min_size=2, max_size=30),
    c=st.floats(0.01, 1.0),
    tau=st.floats(0.05, 2.0),
)
def test_prop3_identity(confidences, c, tau):
    """mu'_S = x^T A' x at the uniform x on S equals c (mean(sqrt w)^2 - mean(w) / |S|) (eq. 6)."""
    n = len(confidences)
    w = node_weights(np.array(confidences), tau)
    a = c * (np.ones((n, n)) - np.eye(n))
    x = np.full(n, 1.0 / n)
    mu_prime = x @ calibrate(a, w) @ x
    mu_bar, nu_bar = np.sqrt(w).mean(), w.mean()
    assert mu_prime == pytest.approx(c * (mu_bar**2 - nu_bar / n), rel=1e-12, abs=1e-15)
    # Jensen: mean(sqrt w)^2 <= mean(w), so calibration is conservative for small cliques.
    assert mu_bar**2 <= nu_bar + 1e-15


@PROPERTY
@given(n=st.integers(2, 40), c=st.floats(0.01, 1.0), weight=st.floats(1e-3, 1.0))
def test_prop3_constant_weights_rescale_linearly(n, c, weight):
    a = c * (np.ones((n, n)) - np.eye(n))
    x = np.full(n, 1.0 / n)
    assert x @ calibrate(a, np.full(n, weight)) @ x == pytest.approx(weight * c * (1 - 1 / n), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# Lemma 1: the shift C ee^T keeps the objective up to a constant and keeps fixed points
# ---------------------------------------------------------------------------------------------


def _random_block_affinity(rng, sizes):
    classes = np.repeat(np.arange(len(sizes)), sizes)
    n = classes.size
    raw = rng.random((n, n))
    a = (raw + raw.T) / 2 * (classes[:, None] == classes[None, :])
    np.fill_diagonal(a, 0.0)
    return a, classes


@PROPERTY
@given(
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=5),
    alpha=st.floats(0.0, 0.5),
    extra=st.floats(0.0, 2.0),
    seed=st.integers(0, 2**16),
)
def test_lemma1_shift_invariance(sizes, alpha, extra, seed):
    rng = np.random.default_rng(seed)
    a, _ = _random_block_affinity(rng, sizes)
    n = a.shape[0]
    w_mat = a - alpha * np.eye(n)
    c_shift = alpha + extra
    x = rng.dirichlet(np.ones(n))
    value = x @ w_mat @ x
    # x^T W' x = x^T W x + C on the simplex.
    assert x @ (w_mat + c_shift * np.ones((n, n))) @ x == pytest.approx(value + c_shift, abs=1e-12)
    # The update on W' moves x in the same direction as on W, damped by the shift:
    # x(t+1) - x(t) = x_i ((Wx)_i - x^T W x) / (x^T W x + C).
    step = replicator_step(a[None], x[None], alpha, c_shift)[0] - x
    assume(value + c_shift > 1e-9)
    np.testing.assert_allclose(step, x * (w_mat @ x - value) / (value + c_shift), atol=1e-12)

    # Hence a fixed point for one shift is a fixed point for every shift C >= alpha.
    x_star = replicator_dynamics(a, alpha=alpha, C=alpha, eps=1e-12, t_max=3000).x
    residual = np.abs(replicator_step(a[None], x_star[None], alpha, alpha)[0] - x_star).max()
    for shift in (c_shift, c_shift + 1.0, 10.0 + alpha):
        moved = replicator_step(a[None], x_star[None], alpha, shift)[0]
        assert np.abs(moved - x_star).max() <= residual + 1e-15


# ---------------------------------------------------------------------------------------------
# Lemma 3: no singleton consensus
# ---------------------------------------------------------------------------------------------


@PROPERTY
@given(n=st.integers(1, 30), c=st.floats(0.0, 1.0), alpha=st.floats(0.001, 1.0))
def test_lemma3_internal_scores(n, c, alpha):
    a = c * (np.ones((n, n)) - np.eye(n))
    w_mat = a - alpha * np.eye(n)
    e_0 = np.eye(n)[0]
    assert e_0 @ w_mat @ e_0 == pytest.approx(-alpha)  # a singleton scores -alpha < 0
    x = np.full(n, 1.0 / n)
    assert x @ w_mat @ x == pytest.approx((c * (n - 1) - alpha) / n)


@PROPERTY
@given(
    sizes=st.lists(st.integers(1, 10), min_size=1, max_size=6),
    n_none=st.integers(0, 3),
    kappa=st.floats(0.0, 1.0),
    spread=st.floats(0.0, 1.5),
    seed=st.integers(0, 2**16),
)
def test_lemma3_no_singleton_consensus(sizes, n_none, kappa, spread, seed):
    """Whenever some answer class is a clique with calibrated internal affinity above
    alpha/(|S|-1), the consensus support {i : x*_i > 1/(10N)} is never a single roll-out."""
    alpha = 0.1
    answers, rng = _rollouts(sizes, n_none, seed)
    texts = _texts(rng, len(answers))
    confidences = rng.normal(-0.5, spread, size=len(answers))
    result = score_group("core", answers, texts, confidences, kappa=kappa, alpha=alpha)
    answered = result.classes >= 0
    a = affinity(result.classes[answered], [t for t, ok in zip(texts, answered) if ok], kappa)
    a_cal = calibrate(a, node_weights(confidences[answered], 0.25))
    sub_classes = result.classes[answered]
    genuine = False
    for k in np.unique(sub_classes):
        members = np.flatnonzero(sub_classes == k)
        if members.size >= 2:
            block = a_cal[np.ix_(members, members)][~np.eye(members.size, dtype=bool)]
            genuine |= bool(block.min() > alpha / (members.size - 1))
    assume(genuine)
    assert result.support.sum() >= 2
