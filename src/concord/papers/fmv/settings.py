"""Each FMV job's settings, resolved from the config: what a rule passes to a command.

One place decides, per model, the generation budget (the FMV paper, Appendix A: 8,192 new
tokens for Instruct models, 16,384 for Thinking models), whether the model reasons before it
answers (code is then taken after ``</think>``), the engine's context (``max_model_len`` = the
prompt budget + the generation budget, so no completion is cut by the context), and GenCluster's
judge (model, reply budget, sampling). The functions are pure: a config in, plain dicts out, so
a test can resolve ``config/paper_fmv.yaml`` into every job's settings and read them against
the paper.
"""

from __future__ import annotations

from typing import Any, Mapping

SECTION = "fmv"  # the FMV section of the config


def section(config: Mapping[str, Any], name: str | None = None) -> dict:
    """The FMV section (or one of its sub-sections), with the schema's defaults filled in
    (:func:`concord.config.resolve`; unknown keys are errors)."""
    from concord.config import resolve

    fmv = dict(config.get(SECTION) or {})
    if name is None:
        return fmv
    out = resolve(f"{SECTION}.{name}", fmv.get(name))
    if name == "gencluster":  # a nested section: a partial `judge` keeps the defaults of the rest
        out["judge"] = resolve(f"{SECTION}.gencluster.judge", (fmv.get(name) or {}).get("judge"))
    return out


def model_spec(config: Mapping[str, Any], model: str) -> dict:
    """A code model's spec: ``fmv.models[model]``, else the top-level ``models[model]``."""
    own = section(config).get("models") or {}
    if model in own:
        return dict(own[model])
    if model in (config.get("models") or {}):
        return dict(config["models"][model])
    known = sorted(set(own) | set(config.get("models") or {}))
    raise KeyError(f"model {model!r} is in neither fmv.models nor models; known: {known}")


def thinking(config: Mapping[str, Any], model: str) -> bool:
    """Does the model reason (``<think>`` ... ``</think>``) before it answers?"""
    return bool(model_spec(config, model).get("thinking", False))


def generation_budget(config: Mapping[str, Any], model: str) -> int:
    """New tokens per completion: the model's own ``max_new_tokens``, else ``fmv.sampling``'s."""
    own = model_spec(config, model).get("max_new_tokens")
    return int(own if own is not None else section(config, "sampling")["max_new_tokens"])


def sampling_settings(config: Mapping[str, Any], model: str) -> dict:
    """``code-generate --sampling`` for ``model``: n, temperature, top_p and its budget."""
    sampling = section(config, "sampling")
    return {"n": int(sampling["n"]), "temperature": float(sampling["temperature"]), "top_p": float(sampling["top_p"]),
            "max_new_tokens": generation_budget(config, model),
            "max_prompt_tokens": int(sampling["max_prompt_tokens"])}


def engine_settings(config: Mapping[str, Any], max_prompt_tokens: int, max_new_tokens: int) -> dict:
    """The ``engine`` section with a context that holds the longest prompt and a full completion."""
    from concord.engines.vllm import context_length  # the one sizing rule of every vLLM engine

    engine = dict(config.get("engine") or {})
    engine["max_model_len"] = context_length(int(max_prompt_tokens), int(max_new_tokens))
    return engine


def generation_engine(config: Mapping[str, Any], model: str) -> dict:
    """``code-generate --engine`` for ``model``."""
    sampling = sampling_settings(config, model)
    return engine_settings(config, sampling["max_prompt_tokens"], sampling["max_new_tokens"])


def judge_model(config: Mapping[str, Any], model: str) -> str:
    """GenCluster's judge for candidates of ``model``: ``fmv.gencluster.judge.model``, else ``model``."""
    return section(config, "gencluster")["judge"].get("model") or model


def judge_settings(config: Mapping[str, Any], model: str) -> dict:
    """GenCluster's settings for candidates of ``model``, the judge's resolved: its model key,
    reply budget (null in the config = the judge model's own generation budget, room for its
    reasoning), sampling, whether it reasons first, and its engine."""
    gencluster = section(config, "gencluster")
    judge = dict(gencluster["judge"])
    key = judge.get("model") or model
    judge["model"] = key
    if judge.get("max_new_tokens") is None:
        judge["max_new_tokens"] = generation_budget(config, key)
    judge["thinking"] = thinking(config, key)
    judge["engine"] = engine_settings(config, judge["max_prompt_tokens"], judge["max_new_tokens"])
    return {**gencluster, "judge": judge}
