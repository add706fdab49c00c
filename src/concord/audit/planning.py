"""Re-planning the workflow through Snakemake's API: what its rerun triggers would compare for every
output of the DAG as configured now (rule, params, code, input set, software stack)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from concord.audit.metadata import _code_sha256

@dataclass(frozen=True)
class PlannedOutput:
    """What the workflow, planned with the current config and code, says about one output."""

    rule: str
    params: tuple[str, ...]
    code_sha256: str | None
    input_set: tuple[str, ...]
    software_stack_hash: str | None
    temp: bool
    param_names: tuple[tuple[str, str], ...] = ()  # (serialized value, the rule's name for it)


@dataclass
class Plan:
    outputs: dict[str, PlannedOutput]  # output name as the workflow gives it (Snakemake's key)
    workdir: Path

    def lookup(self, target: str, results: Path) -> PlannedOutput | None:
        if target in self.outputs:
            return self.outputs[target]
        wanted = os.path.abspath(results / target) if not os.path.isabs(target) else target
        return self._by_abspath().get(os.path.abspath(wanted))

    def _by_abspath(self) -> dict[str, PlannedOutput]:
        if not hasattr(self, "_abs"):
            self._abs = {os.path.abspath(self.workdir / k): v for k, v in self.outputs.items()}
        return self._abs


class PlanError(RuntimeError):
    """The workflow could not be planned (bad config, missing Snakefile, ...)."""


def plan(
    snakefile: str | os.PathLike,
    workdir: str | os.PathLike | None = None,
    configfiles: Iterable[str | os.PathLike] = (),
    targets: Iterable[str] = (),
) -> Plan:
    """Plan the workflow (as ``snakemake -n`` would) and read, for every output of every job in
    the DAG, what Snakemake's rerun triggers compare with its metadata: rule, params, code, input
    set, software stack -- computed by Snakemake itself (the persistence layer behind
    ``--summary`` and ``--list-changes``), not re-derived here."""
    import contextlib
    import io as _io

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
    )

    snakefile = Path(snakefile).resolve()
    work = Path(workdir).resolve() if workdir is not None else Path.cwd().resolve()
    if not snakefile.is_file():
        raise PlanError(f"no Snakefile at {snakefile}")
    import logging

    captured = _io.StringIO()
    snakemake_logger = logging.getLogger("snakemake")
    level = snakemake_logger.level
    snakemake_logger.setLevel(logging.WARNING)  # its INFO lines ("Building DAG of jobs...") are noise here
    try:
        with contextlib.redirect_stdout(captured), SnakemakeApi(
            OutputSettings(quiet={Quietness.ALL}, show_failed_logs=False)
        ) as api:
            wf_api = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(configfiles=[Path(c).resolve() for c in configfiles]),
                snakefile=snakefile,
                workdir=work,
            )
            dag_api = wf_api.dag(dag_settings=DAGSettings(targets=set(targets)))
            # The same calls DAGApi.list_changes/summary make, done once for every change type.
            workflow = dag_api.workflow_api._workflow
            workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            outputs = _planned_outputs(workflow)
    except PlanError:
        raise
    except BaseException as exc:  # Snakemake raises WorkflowError, SystemExit, ... on a bad plan
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = str(exc).strip() or type(exc).__name__
        raise PlanError(f"the workflow does not plan: {detail[-2000:]}") from None
    finally:
        snakemake_logger.setLevel(level)
    return Plan(outputs=outputs, workdir=work)


def _planned_outputs(workflow) -> dict[str, PlannedOutput]:
    """Every output of every job in a planned workflow's DAG, keyed by its name in the workflow."""
    persistence = workflow.persistence
    outputs = {}
    for job in workflow.dag.jobs:
        code = persistence._code(job.rule)
        # Snakemake records params as sorted serialized values, without their names;
        # keep the names so a changed scalar is reported as "n_resamples: 500 -> 400".
        names = []
        for name, value in job.params.items():
            serialized = persistence._serialize_param(value)
            if isinstance(serialized, str):
                names.append((serialized, name))
        planned = PlannedOutput(
            rule=job.rule.name,
            params=tuple(persistence._params(job)),
            code_sha256=_code_sha256(code),
            input_set=tuple(str(p) for p in persistence._input(job)),
            software_stack_hash=persistence._software_stack_hash(job),
            temp=False,
            param_names=tuple(names),
        )
        for f in job.output:
            outputs[str(f)] = PlannedOutput(**{**planned.__dict__, "temp": bool(f.is_temp)})
    return outputs
