"""CoRE's roll-out graph (seed 000, section 3.2): affinity, calibration, replicator dynamics, read-outs.

All functions are pure and numpy-only; :mod:`concord.consensus` wires them into ``score_group``.
Shapes: ``n`` answered roll-outs of one question; batched functions take a leading axis ``B``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

NGRAM = 4
_WHITE_SPACES = re.compile(r"\s\s+")  # sklearn's char analyzer collapses runs of 2+ whitespace


# ---------------------------------------------------------------------------------------------
# Reasoning representation: TF-IDF of character 4-grams, fitted per question
# ---------------------------------------------------------------------------------------------


def char_ngram_tfidf(texts: Sequence[str], n: int = NGRAM) -> np.ndarray:
    """Dense L2-normalised TF-IDF rows, identical (up to column order) to
    ``TfidfVectorizer(analyzer="char", ngram_range=(n, n)).fit_transform(texts)``.

    scikit-learn builds char n-grams in a Python loop (~40 ms for 64 texts of 2,000 characters,
    more than CoRE's whole per-question budget); here the n-grams are packed into integers and
    counted with one sort. Same preprocessing (``str.lower``, ``\\s\\s+`` -> one space), raw counts,
    smooth idf ``ln((1+n_docs)/(1+df)) + 1``, L2 rows. Falls back to scikit-learn when the texts
    use too many distinct characters to pack. Texts shorter than ``n`` get a zero row.
    """
    docs = [_WHITE_SPACES.sub(" ", t.lower()) for t in texts]
    n_docs = len(docs)
    codes = np.frombuffer("".join(docs).encode("utf-32-le"), dtype=np.uint32)
    n_pos = codes.size - n + 1
    if n_docs == 0 or n_pos <= 0:
        return np.zeros((n_docs, 0))
    doc_bits = max(1, (n_docs - 1).bit_length())
    char_bits = int(codes.max()).bit_length()
    if n * char_bits + doc_bits <= 64:
        symbols = codes.astype(np.uint64)
    else:
        # Dense order-preserving ranks of the characters used: packing ranks keeps the
        # lexicographic order of the n-grams, hence scikit-learn's (sorted) column order.
        present = np.zeros(int(codes.max()) + 1, dtype=np.uint64)
        present[codes] = 1
        rank_of = np.cumsum(present) - np.uint64(1)
        char_bits = max(1, int(rank_of[-1]).bit_length())
        if n * char_bits + doc_bits > 64:
            return _sklearn_tfidf(texts, n)
        symbols = rank_of[codes]

    gram = symbols[:n_pos].copy()
    for j in range(1, n):
        gram <<= np.uint64(char_bits)
        gram |= symbols[j : j + n_pos]
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=n_docs)
    ends = np.cumsum(lengths)
    inside = np.ones(n_pos, dtype=bool)  # an n-gram must not span two texts
    for start, end in zip(ends - lengths, ends):
        inside[max(start, end - n + 1) : end] = False
    doc_of = np.repeat(np.arange(n_docs, dtype=np.uint64), lengths)[:n_pos]
    keys = (gram[inside] << np.uint64(doc_bits)) | doc_of[inside]
    if keys.size == 0:
        return np.zeros((n_docs, 0))
    keys.sort()

    first = np.empty(keys.size, dtype=bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, keys.size))
    unique = keys[starts]
    doc = (unique & np.uint64((1 << doc_bits) - 1)).astype(np.intp)
    term = unique >> np.uint64(doc_bits)
    new_term = np.empty(term.size, dtype=bool)
    new_term[0] = True
    np.not_equal(term[1:], term[:-1], out=new_term[1:])
    term_id = np.cumsum(new_term) - 1
    n_terms = int(term_id[-1]) + 1

    df = np.bincount(term_id, minlength=n_terms)
    idf = np.log((1.0 + n_docs) / (1.0 + df)) + 1.0
    values = counts * idf[term_id]
    norms = np.sqrt(np.bincount(doc, weights=values * values, minlength=n_docs))
    norms[norms == 0] = 1.0
    matrix = np.zeros((n_docs, n_terms))
    matrix[doc, term_id] = values / norms[doc]
    return matrix


def _sklearn_tfidf(texts: Sequence[str], n: int) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        return TfidfVectorizer(analyzer="char", ngram_range=(n, n)).fit_transform(texts).toarray()
    except ValueError:  # empty vocabulary: every text is shorter than n
        return np.zeros((len(texts), 0))


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _gram(h: np.ndarray) -> np.ndarray:
    # One BLAS thread: on a busy machine a multi-threaded OpenBLAS spends ~100x longer
    # synchronising its threads than computing this 64 x 64 product (measured 225 ms vs 3 ms).
    with _blas_controller().limit(limits=1, user_api="blas"):
        return h @ h.T


def reasoning_kernel(texts: Sequence[str]) -> np.ndarray:
    """K_rsn(i, j) = (1 + cos(h_i, h_j)) / 2 with per-question char-4-gram TF-IDF vectors h.

    A text without any 4-gram has a zero vector; its cosine with anything is taken as 0.
    """
    h = char_ngram_tfidf(texts)
    cos = np.clip(_gram(h), -1.0, 1.0)
    return 0.5 * (1.0 + cos)


# ---------------------------------------------------------------------------------------------
# Affinity and calibration
# ---------------------------------------------------------------------------------------------


def answer_kernel(classes: np.ndarray) -> np.ndarray:
    """K_ans(i, j) = 1[same answer class]; roll-outs without an answer (class -1) match nothing."""
    classes = np.asarray(classes)
    same = classes[:, None] == classes[None, :]
    answered = classes >= 0
    return (same & answered[:, None] & answered[None, :]).astype(float)


def affinity(classes: np.ndarray, texts: Sequence[str] | None, kappa: float) -> np.ndarray:
    """Eq. (1): A_ij = K_ans (kappa + (1 - kappa) K_rsn), A_ii = 0. ``texts`` unused at kappa = 1."""
    k_ans = answer_kernel(classes)
    if kappa >= 1.0:
        a = k_ans
    else:
        if texts is None:
            raise ValueError("reasoning texts are required for the graph when kappa < 1")
        a = k_ans * (kappa + (1.0 - kappa) * reasoning_kernel(texts))
    np.fill_diagonal(a, 0.0)
    return a


def node_weights(confidences: np.ndarray, tau: float) -> np.ndarray:
    """w_i = exp((c_i - max_j c_j) / tau) in (0, 1], anchored at the most confident roll-out."""
    c = np.asarray(confidences, dtype=float)
    return np.exp((c - c.max()) / tau)


def calibrate(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Eq. (2): A'_ij = A_ij sqrt(w_i w_j), i.e. D^1/2 A D^1/2 with D = diag(w)."""
    s = np.sqrt(np.asarray(w, dtype=float))
    return a * s[:, None] * s[None, :]


# ---------------------------------------------------------------------------------------------
# Replicator dynamics on W' = A' - alpha I + C ee^T
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Equilibrium:
    x: np.ndarray  # (B, n) equilibrium mass, zero on padding; (n,) for a single question
    iterations: np.ndarray  # (B,) steps taken; a scalar for a single question
    converged: np.ndarray  # (B,) whether ||x(t+1) - x(t)|| < eps was reached within t_max


def replicator_step(a_cal: np.ndarray, x: np.ndarray, alpha: float, c_shift: float) -> np.ndarray:
    """Eq. (3) for a batch: x_i <- x_i (W'x)_i / x^T W' x with W' = A' - alpha I + C ee^T."""
    return _step(shifted_payoff(a_cal, alpha, c_shift), x)


def shifted_payoff(a_cal: np.ndarray, alpha: float, c_shift: float) -> np.ndarray:
    """W' = A' - alpha I + C ee^T (batched). Padded nodes keep x_i = 0 forever, so the extra
    entries C in their rows and columns never enter the game."""
    n = a_cal.shape[-1]
    return a_cal - alpha * np.eye(n) + c_shift


def _step(w_shift: np.ndarray, x: np.ndarray) -> np.ndarray:
    grown = np.matmul(w_shift, x[..., None])[..., 0]
    grown *= x
    total = grown.sum(axis=-1, keepdims=True)
    if (total > 0).all():
        grown /= total
        return grown
    # x^T W' x = 0 only when nothing can grow (one node with C = alpha, or no edges with
    # alpha = C = 0): every point is then a fixed point.
    return np.where(total > 0, grown / np.where(total > 0, total, 1.0), x)


def replicator_dynamics(
    a_cal: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    alpha: float = 0.1,
    C: float | None = None,
    eps: float = 1e-6,
    t_max: int = 200,
) -> Equilibrium:
    """Iterate eq. (3) from the barycenter of each question's valid nodes until the step is
    shorter than ``eps`` (Euclidean) or ``t_max`` steps; questions stop independently.

    ``a_cal``: (n, n) or (B, n, n) calibrated affinities; ``mask``: which nodes exist (padding).
    """
    a_cal = np.asarray(a_cal, dtype=float)
    single = a_cal.ndim == 2
    if single:
        a_cal = a_cal[None]
    if a_cal.ndim != 3 or a_cal.shape[1] != a_cal.shape[2]:
        raise ValueError(f"affinity must be (n, n) or (B, n, n), got shape {a_cal.shape}")
    if (a_cal < 0).any():
        raise ValueError("affinities must be nonnegative")
    c_shift = alpha if C is None else C
    if alpha < 0 or c_shift < alpha:
        raise ValueError(f"need 0 <= alpha <= C so that W' is nonnegative (alpha={alpha}, C={c_shift})")
    batch, n, _ = a_cal.shape
    mask = np.ones((batch, n), dtype=bool) if mask is None else np.asarray(mask, dtype=bool).reshape(batch, n)
    sizes = mask.sum(axis=1)
    if (sizes == 0).any():
        raise ValueError("every question needs at least one node")
    x = mask / sizes[:, None]
    iterations = np.full(batch, t_max, dtype=int)
    converged = np.zeros(batch, dtype=bool)
    active = np.arange(batch)
    w_work, x_work = shifted_payoff(a_cal, alpha, c_shift), x.copy()
    eps_sq = eps * eps
    for t in range(1, t_max + 1):
        x_new = _step(w_work, x_work)
        x_work -= x_new
        done = np.einsum("bi,bi->b", x_work, x_work) < eps_sq
        x_work = x_new
        if done.any():
            finished = active[done]
            x[finished] = x_work[done]
            iterations[finished] = t
            converged[finished] = True
            keep = ~done
            active, w_work, x_work = active[keep], w_work[keep], x_work[keep]
            if active.size == 0:
                break
    x[active] = x_work
    if single:
        return Equilibrium(x[0], iterations[0], converged[0])
    return Equilibrium(x, iterations, converged)


# ---------------------------------------------------------------------------------------------
# Read-outs (eq. 4)
# ---------------------------------------------------------------------------------------------


def class_mass(x: np.ndarray, classes: np.ndarray, n_classes: int) -> np.ndarray:
    """Equilibrium mass s_a = sum of x_i over class a (class -1 ignored)."""
    classes = np.asarray(classes)
    keep = classes >= 0
    return np.bincount(classes[keep], weights=np.asarray(x)[keep], minlength=n_classes)


def argmax_first(scores: np.ndarray, rtol: float = 1e-9) -> int:
    """Index of the maximum; (near-)ties go to the first, i.e. the answer seen first.

    The tolerance keeps float noise from breaking exact ties: classes of equal size and
    confidence must tie, whatever the order of summation.
    """
    scores = np.asarray(scores, dtype=float)
    best = scores.max()
    return int(np.flatnonzero(scores >= best - rtol * max(1.0, abs(best)))[0])


def graded_rewards(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """R_i = (A x*)_i / max_j (A x*)_j with the uncalibrated A; all zero when nobody has support."""
    support = a @ x
    top = support.max() if support.size else 0.0
    return support / top if top > 0 else np.zeros_like(support)


def cohesion_gate(a: np.ndarray, x: np.ndarray) -> float:
    """w_q = x*^T A x* (uncalibrated A), in [0, 1]."""
    return float(x @ a @ x)


def clique_flip_gap(n_star: int, m: int, c_star: float, c_w: float, tau: float) -> float:
    """Confidence gap delta = c_conf* - c_conf_w (nats) at which a correct clique (size n*, base
    affinity c*) overturns a wrong one (size m, affinity c_w) on the exact pipeline.

    Derived in ``tests/test_propositions.py``: the flip happens at w*(n*-1)c* = w_w(m-1)c_w for
    any alpha and any shift C >= alpha, i.e. delta = tau ln(c_w (m-1) / (c* (n*-1))).
    """
    return float(tau * np.log(c_w * (m - 1) / (c_star * (n_star - 1))))
