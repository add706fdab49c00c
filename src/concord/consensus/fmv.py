"""Functional Majority Voting: consensus over programs' execution vectors.

Input everywhere is one question's N x K outcome matrix (N candidate programs, K test inputs),
as returned by :func:`concord.execution.run_programs`. A cell is an outcome-like object with
``status`` and ``output`` (``status == "ok"`` carries an output), a mapping with those keys, or
a bare output string (``None`` = no output).

* FMV (the functional medoid): a candidate is *valid* when it produced an output on every input.
  ``S(c_i) = sum over valid j != i of #{k : o_ik == o_jk}`` for valid i; the consensus program is
  ``argmax S`` (ties: the lowest index, i.e. the first seen, as TTRL breaks ties).
* Pointwise-FMV: the synthetic target ``y*_k = mode{o_1k, ..., o_Nk}`` over every output produced
  on input k (an errored or timed-out cell has no output and no vote); ties: first seen.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = [
    "execution_vectors", "valid_mask", "encode_outputs", "fmv_scores", "fmv_scores_from_codes", "fmv_select",
    "fmv_select_codes", "pointwise_target", "functional_clusters",
]


def _cell(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        status, output = value.get("status"), value.get("output")
    else:
        try:
            status, output = value.status, value.output
        except AttributeError:
            raise TypeError(
                f"an outcome must have .status/.output, be a mapping with those keys, or be a string/None; "
                f"got {type(value).__name__}"
            ) from None
    if status != "ok":
        return None
    if not isinstance(output, str):
        raise ValueError(f"an 'ok' outcome must carry a string output, got {output!r}")
    return output


def execution_vectors(outcomes: Sequence[Sequence[Any]]) -> list[list[str | None]]:
    """The N x K matrix of outputs (None where a candidate produced none)."""
    rows = [[_cell(c) for c in row] for row in outcomes]
    if rows and len({len(r) for r in rows}) != 1:
        raise ValueError(f"every candidate needs one outcome per input; row lengths differ: {sorted({len(r) for r in rows})}")
    return rows


def valid_mask(outcomes: Sequence[Sequence[Any]]) -> np.ndarray:
    """Candidates that ran without error or timeout on every input."""
    return np.array([all(o is not None for o in row) for row in execution_vectors(outcomes)], dtype=bool)


def encode_outputs(outcomes: Sequence[Sequence[Any]]) -> np.ndarray:
    """The N x K matrix of outputs as integers: per input, equal outputs share a code (numbered
    by first appearance), and -1 marks no output. Equality of codes is equality of outputs."""
    vectors = execution_vectors(outcomes)
    n_inputs = len(vectors[0]) if vectors else 0
    codes = np.full((len(vectors), n_inputs), -1, dtype=np.int64)
    for k in range(n_inputs):
        seen: dict[str, int] = {}
        for i, row in enumerate(vectors):
            if row[k] is not None:
                codes[i, k] = seen.setdefault(row[k], len(seen))
    return codes


def fmv_scores_from_codes(codes: np.ndarray) -> np.ndarray:
    """S(c_i) from :func:`encode_outputs` codes; invalid candidates get -inf."""
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2:
        raise ValueError(f"codes must be an N x K matrix, got shape {codes.shape}")
    n, k = codes.shape
    if n and k == 0:
        raise ValueError("FMV needs at least one test input (got K = 0)")
    scores = np.full(n, -np.inf)
    valid = (codes >= 0).all(axis=1) if n else np.zeros(0, dtype=bool)
    if not valid.any():
        return scores
    # S_i = sum_k (count_k[o_ik] - 1) over valid candidates: the pairwise sum of eq. (1) in
    # O(N K). Offsetting each input's codes makes one bincount count every column at once.
    sub = codes[valid]
    offsets = np.concatenate([[0], np.cumsum(sub.max(axis=0) + 1)[:-1]])
    ids = sub + offsets[None, :]
    counts = np.bincount(ids.ravel())
    scores[valid] = (counts[ids] - 1).sum(axis=1)
    return scores


def fmv_scores(outcomes: Sequence[Sequence[Any]]) -> np.ndarray:
    """S(c_i) for every candidate (float); invalid candidates get -inf so they never win."""
    return fmv_scores_from_codes(encode_outputs(outcomes))


def fmv_select_codes(codes: np.ndarray) -> int | None:
    """:func:`fmv_select` on :func:`encode_outputs` codes (fast path for repeated subsets)."""
    scores = fmv_scores_from_codes(codes)
    if scores.size == 0 or not np.isfinite(scores).any():
        return None
    return int(np.argmax(scores))  # the first maximum: ties go to the lowest index


def fmv_select(outcomes: Sequence[Sequence[Any]]) -> int | None:
    """Index of the consensus program c* = argmax S(c_i), or None when no candidate is valid."""
    if len(outcomes) == 0:
        return None
    return fmv_select_codes(encode_outputs(outcomes))


def pointwise_target(outcomes: Sequence[Sequence[Any]]) -> list[str | None]:
    """y*_k = the most common output on input k (None when no candidate produced one)."""
    vectors = execution_vectors(outcomes)
    if not vectors:
        return []
    target = []
    for k in range(len(vectors[0])):
        column = [row[k] for row in vectors if row[k] is not None]
        if not column:
            target.append(None)
            continue
        counts = Counter(column)
        best = max(counts.values())
        # Counter keeps first-insertion order, so this is the first-seen output among the modes.
        target.append(next(out for out, c in counts.items() if c == best))
    return target


def functional_clusters(outcomes: Sequence[Sequence[Any]]) -> np.ndarray:
    """Cluster id per candidate: valid candidates with identical execution vectors share an id
    (numbered by first appearance); invalid candidates get -1."""
    ids: dict[tuple, int] = {}
    out = []
    for row in execution_vectors(outcomes):
        if any(o is None for o in row):
            out.append(-1)
            continue
        out.append(ids.setdefault(tuple(row), len(ids)))
    return np.array(out, dtype=int)
