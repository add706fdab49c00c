"""The evaluation files a table reads: their paths, their checked contents (pass@1 and the
per-question records) and the mean and std over seeds."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from concord import io
from concord.papers.core.tables.spec import ARMS, table_spec

_EVAL_RE = re.compile(
    r"(?:^|/)eval/(?P<model>[^/]+)/(?P<benchmark>[^/]+)/(?P<arm>[^/]+)/seed(?P<seed>[0-9]+)\.json$"
)


def eval_path(results_dir: str | Path, model: str, benchmark: str, arm: str, seed: int) -> Path:
    return Path(results_dir) / "eval" / model / benchmark / arm / f"seed{seed}.json"


def eval_paths(
    results_dir: str | Path,
    models: Iterable[str],
    benchmarks: Iterable[str],
    arms: Iterable[str],
    seeds: Iterable[int],
) -> list[Path]:
    """The evaluation JSONs of a grid, in a fixed order (Snakemake input functions use this)."""
    benchmarks, arms, seeds = list(benchmarks), list(arms), list(seeds)
    return [
        eval_path(results_dir, m, b, a, s) for m in models for b in benchmarks for a in arms for s in seeds
    ]


def table_inputs(config: Mapping, name: str, results_dir: str | Path = "results") -> list[Path]:
    """Exactly the evaluation files one table reads."""
    spec = table_spec(config, name)
    return [path for arm in spec.arms
            for path in eval_paths(results_dir, spec.models, spec.benchmarks, [arm], spec.seeds_of(arm))]


def table_outputs(name: str, results_dir: str | Path = "results") -> dict[str, Path]:
    stem = Path(results_dir) / "tables" / name
    return {ext: stem.with_suffix(f".{ext}") for ext in ("csv", "md", "tex")}


def parse_eval_path(path: str | Path) -> dict:
    match = _EVAL_RE.search(Path(path).as_posix())
    if not match:
        raise ValueError(f"{path}: not an evaluation file eval/{{model}}/{{benchmark}}/{{arm}}/seed{{seed}}.json")
    info = match.groupdict()
    if info["arm"] not in ARMS:
        raise ValueError(f"{path}: unknown arm {info['arm']!r} (expected one of {', '.join(ARMS)})")
    info["seed"] = int(info["seed"])
    return info


def load_eval(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per evaluation file: model, benchmark, arm, seed, pass_at_1 (fraction), the
    per-question accuracies (``{question id: n_correct / k}``) and answers, and the hash of the
    evaluated weights (``provenance.model_sha256``; None where not recorded)."""
    rows = []
    for path in paths:
        info = parse_eval_path(path)
        try:
            payload = io.read_json(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"evaluation file missing: {path}") from None
        value = payload.get("pass_at_1") if isinstance(payload, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{path}: 'pass_at_1' must be a number, got {value!r}")
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ValueError(f"{path}: 'pass_at_1' must lie in [0, 1], got {value!r}")
        accuracy, answers = _per_question(payload, path, float(value))
        rows.append({**info, "pass_at_1": float(value), "path": str(path), "accuracy": accuracy, "answers": answers,
                     "model_sha256": (payload.get("provenance") or {}).get("model_sha256")})
    frame = pd.DataFrame(rows, columns=["model", "benchmark", "arm", "seed", "pass_at_1", "path", "accuracy", "answers",
                                        "model_sha256"])
    dupes = frame[frame.duplicated(["model", "benchmark", "arm", "seed"], keep=False)]
    if not dupes.empty:
        raise ValueError(f"the same (model, benchmark, arm, seed) appears twice: {sorted(set(dupes['path']))}")
    return frame


def _per_question(payload: Mapping, path, pass_at_1: float) -> tuple[dict[str, float], dict[str, list]]:
    """``{id: n_correct / k}`` and ``{id: answers}``, checked against the file's own pass@1;
    (None, None) for a file without per-question records (the figures need none; the tables'
    paired tests refuse it, :func:`compare_to_base`)."""
    records = payload.get("per_question")
    if not records:
        return None, None
    if not isinstance(records, list):
        raise ValueError(f"{path}: 'per_question' must be a list of records")
    accuracy, answers = {}, {}
    for r in records:
        try:
            qid, n_correct, k = str(r["id"]), r["n_correct"], r["k"]
        except (KeyError, TypeError):
            raise ValueError(f"{path}: a per_question record lacks id, n_correct or k: {r!r}") from None
        if qid in accuracy:
            raise ValueError(f"{path}: question {qid!r} appears twice in per_question")
        if not (isinstance(k, int) and k >= 1 and isinstance(n_correct, int) and 0 <= n_correct <= k):
            raise ValueError(f"{path}: question {qid!r} has n_correct={n_correct!r} of k={k!r}")
        accuracy[qid] = n_correct / k
        answers[qid] = list(r.get("answers") or [])
    mean = sum(accuracy.values()) / len(accuracy)
    if not math.isclose(mean, pass_at_1, rel_tol=0, abs_tol=1e-9):
        raise ValueError(f"{path}: pass_at_1 {pass_at_1!r} is not the mean of its per_question accuracies ({mean!r})")
    return accuracy, answers


def summarise(frame: pd.DataFrame, ddof: int = 0) -> pd.DataFrame:
    """Mean and std over seeds in percent, indexed by (model, benchmark, arm).

    ``ddof=0`` (population std over seeds) matches the paper's tables, e.g. AIME seeds
    (0, 3.3, 3.3) are reported as 2.2 +/- 1.6.
    """
    if frame.empty:
        raise ValueError("no evaluation results to summarise")
    pct = frame.assign(pct=frame["pass_at_1"] * 100.0)
    grouped = pct.groupby(["model", "benchmark", "arm"], sort=False)["pct"]
    out = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=ddof), "n_seeds": grouped.size()})
    # A single seed has no spread; report 0 rather than NaN so tables stay numeric.
    out["std"] = out["std"].fillna(0.0)
    return out
