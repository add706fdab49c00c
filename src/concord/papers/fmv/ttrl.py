"""TTRL with FMV rewards on code questions (arms ``fmv`` and ``fmv_pointwise``).

The FMV arms train through the same entry point as the CoRE arms, :func:`concord.rl.run.train`:
one trainer set-up (:class:`concord.rl.trainer.ConsensusGRPOTrainer`), one checkpoint/resume
path, one validation and early-stopping loop, one model-publishing path. What this module adds
is the ``code`` task (:mod:`concord.rl.tasks`): the prompt is the code-generation conversation,
every training row carries the question's non-gold fields the FMV scorer needs (oracle inputs,
mode, function name, helper code), and validation grades completions on the hidden tests in the
sandbox. Hidden tests never enter the training rows, and no label chooses a checkpoint: a run
trains a fixed step budget (:func:`check_stopping_rule`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from concord.rl.config import TrainingRun

#: Question fields the FMV reward reads (none of them holds an answer).
CONTEXT_FIELDS = ("inputs", "mode", "fn_name", "prefix", "starter_code", "source")
#: Execution settings a run passes to the scorer and to validation.
EXEC_KEYS = ("timeout_s", "memory_mb", "sandbox")


def load_code_questions(path: str | os.PathLike) -> list[dict]:
    from concord import io
    from concord.papers.fmv.data import validate_record

    if not Path(path).is_file():
        raise FileNotFoundError(f"questions file not found: {path}")
    records = [validate_record(r) for r in io.read_jsonl(path)]
    if not records:
        raise ValueError(f"{path}: no questions")
    return records


def code_context(question: Mapping[str, Any]) -> dict[str, Any]:
    """The FMV scorer's fields of one question. Arrow needs one type per column: a missing
    function name becomes "", missing inputs []."""
    return {f: question.get(f) if question.get(f) is not None else ([] if f == "inputs" else "") for f in CONTEXT_FIELDS}


def code_messages(question: Mapping[str, Any], prompt_style: str) -> list[dict[str, str]]:
    from concord.papers.fmv.prompts import generation_messages

    return generation_messages(dict(question))


def grade_code(questions: Sequence[Mapping[str, Any]], completions: Sequence[Sequence[str]],
               params: Mapping[str, Any] | None = None) -> list[list[bool]]:
    """Hidden-test verdicts of each question's completions (validation only)."""
    from concord.papers.fmv.grading import ExecSettings, execute, grade, programs_for

    settings = ExecSettings(**{k: v for k, v in dict(params or {}).items() if k in EXEC_KEYS})
    verdicts = []
    for q, texts in zip(questions, completions):
        q = dict(q)
        programs = programs_for(q, texts)
        verdicts.append([bool(v) for v in grade(q, programs, execute(q, programs, settings), settings)])
    return verdicts


def code_diagnostics(groups: Sequence, questions_by_id: Mapping[str, Any]) -> dict[str, float]:
    """Per step: the share of questions whose vote found a target, and the mean reward mass."""
    if not groups:
        return {}
    return {
        "label_rate": sum(g.label is not None for g in groups) / len(groups),
        "mean_mass": sum(sum(g.rewards) / len(g.rewards) for g in groups) / len(groups),
    }


def _register() -> None:
    from concord.rl.tasks import TrainingTask, register_task

    register_task(TrainingTask(name="code", load=load_code_questions, messages=code_messages, grade=grade_code,
                               context=code_context, diagnostics=code_diagnostics))


_register()


def check_stopping_rule(cfg: Mapping[str, Any]) -> str:
    """Refuse label-based model selection on evaluated questions; return the rule in words.

    The FMV paper trains "until performance on the validation set saturates" (Appendix A), but a
    validation set cut from the benchmark is graded with hidden tests of questions Tables 1-2
    then report (Table 2 scores every question; Table 1's train column holds the cut-off
    questions, never trained on). So an FMV-TTRL run trains a fixed step budget and chooses
    nothing by labels: ``early_stopping_patience`` must be null, and ``validation_fraction``
    null too (it would withhold questions from a run the tables describe as trained on them).
    Validation may still run (``eval_every``) as a curve that selects nothing.
    """
    if cfg.get("early_stopping_patience") is not None:
        raise ValueError(
            "FMV-TTRL early stopping would pick the stopping step by hidden-test labels of questions Tables 1-2 "
            "report; set fmv.ttrl.training.early_stopping_patience: null (a fixed step budget)")
    if cfg.get("validation_fraction") is not None:
        raise ValueError(
            "fmv.ttrl.training.validation_fraction would withhold questions from training that Tables 1-2 report "
            "as trained on; set it to null (FMV-TTRL selects no checkpoint by labels)")
    return "fixed step budget, no labels"


def train_code(run: TrainingRun) -> Path:
    """Train ``run.model_dir`` on the code questions of ``run.questions_path`` with the arm's FMV
    rewards (:func:`concord.rl.run.train` with the ``code`` task); write ``run.out_dir``.

    ``run.consensus`` holds the execution settings (``timeout_s``, ``memory_mb``, ``sandbox``) the
    scorer and validation run programs with; the task, the provenance and the stopping rule are
    this paper's, whatever the run says.
    """
    from concord.config import resolve_section
    from concord.papers.fmv.rewards import ARMS
    from concord.rl.run import train

    if run.arm not in ARMS:
        raise ValueError(f"FMV TTRL arm must be one of {sorted(ARMS)}, got {run.arm!r}")
    params = {k: v for k, v in run.consensus.items() if k in EXEC_KEYS}
    # The section as configured (provenance has always recorded it before validation's budget is filled in).
    cfg = resolve_section("training", dict(run.training))
    check_stopping_rule(cfg)
    return train(replace(run, consensus=params, task="code", provenance_step="fmv-train",
                         provenance_config={"training": cfg, "execution": params, "arm": run.arm}))
