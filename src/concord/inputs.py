"""Inputs only the user can supply, checked when the workflow is planned.

The full reproduction (``snakemake --profile slurm``: the three papers' configs) needs four
things no download inside the workflow can provide; README.md ("Inputs only you can supply")
names them in one place:

* the SLURM account (and partition): ``default-resources`` in ``slurm/config.yaml``;
* the LiveCodeBench release file the FMV paper reads: ``fmv.benchmarks.<b>.path``
  (``config/paper_fmv.yaml``);
* the SC-MoA paper's benchmark files (``scmoa.benchmarks.<b>.path``) and
  * the OpenAI-compatible endpoints serving its models (``scmoa.endpoints.<key>.base_url`` and
    ``model``, or ``scmoa.server``; ``config/paper_scmoa.yaml``), reachable from the compute nodes.

A missing one is a short plan-time error that says where to supply it and how to run the other
papers without it, instead of a job failing hours into the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse

ACCOUNT_RESOURCE = "slurm_account"  # the SLURM executor plugin's resource name
PLACEHOLDER_ACCOUNT = "YOUR_ACCOUNT"
LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
#: How to run the other papers when one paper's inputs are missing.
WITHOUT = {
    "fmv": "without FMV: --configfile config/paper.yaml config/paper_scmoa.yaml",
    "scmoa": "without SC-MoA: --configfile config/paper.yaml config/paper_fmv.yaml",
}


@dataclass(frozen=True)
class MissingInput:
    what: str
    fix: str
    paper: str | None = None  # the paper that needs it (None: every cluster run)

    def line(self) -> str:
        return f"  - {self.what}: {self.fix}"


def cluster_account(workflow) -> str | None:
    """The SLURM profile's account default resource as written, None without a SLURM profile."""
    try:
        return workflow.resource_settings.default_resources[ACCOUNT_RESOURCE].raw
    except (AttributeError, KeyError, TypeError):
        return None


def _exists(path: str, workdir: Path) -> bool:
    return (Path(path) if os.path.isabs(path) else workdir / path).exists()


def _missing_paths(benchmarks: Mapping[str, Any], base: Path) -> list[str]:
    return [spec["path"] for _, spec in sorted(benchmarks.items())
            if isinstance(spec, Mapping) and spec.get("path") and not _exists(spec["path"], base)]


def missing_inputs(config: Mapping[str, Any], *, account: str | None = None,
                   workdir: str | os.PathLike | None = None) -> list[MissingInput]:
    """Every user-supplied input the planned run needs and does not have.

    ``account``: the raw ``slurm_account`` default resource, None when the run does not go
    through a SLURM profile (then the account and the endpoint's reachability are not checked).
    """
    base = Path(workdir) if workdir is not None else Path.cwd()
    on_cluster = account is not None
    out: list[MissingInput] = []
    if on_cluster and str(account).strip() in ("", PLACEHOLDER_ACCOUNT):
        out.append(MissingInput("SLURM account", f"still {account!r}; set slurm_account (and slurm_partition) "
                                                 "under default-resources in slurm/config.yaml"))
    fmv = config.get("fmv") or {}
    missing = _missing_paths(fmv.get("benchmarks") or {}, base) if fmv.get("enabled", True) else []
    if missing:
        out.append(MissingInput("LiveCodeBench release file (FMV)", f"{', '.join(missing)} not found; put it there or "
                                "set fmv.benchmarks.<name>.path in config/paper_fmv.yaml", "fmv"))
    scmoa = config.get("scmoa") or {}
    missing = _missing_paths(scmoa.get("benchmarks") or {}, base)
    if missing:
        out.append(MissingInput("SC-MoA benchmark files", f"{', '.join(missing)} not found; put them there or set "
                                "scmoa.benchmarks.<name>.path in config/paper_scmoa.yaml", "scmoa"))
    urls = [("scmoa.server.base_url", (scmoa.get("server") or {}).get("base_url"))]
    urls += [(f"scmoa.endpoints.{key}.base_url", (spec or {}).get("base_url"))
             for key, spec in sorted((scmoa.get("endpoints") or {}).items())]
    placeholder = [f"{where} ({url})" for where, url in urls if url and "YOUR" in url.upper()]
    # A workstation's single-node Slurm runs every job on this machine: loopback reaches it there.
    single_node = bool((config.get("cluster") or {}).get("single_node", False))
    unreachable = [f"{where} ({url})" for where, url in urls
                   if on_cluster and not single_node and url and "YOUR" not in url.upper() and urlparse(url).hostname in LOOPBACK]
    if scmoa.get("models") and placeholder:
        out.append(MissingInput("SC-MoA model endpoint", f"still a placeholder: {', '.join(placeholder)}; serve the "
                                "models (`vllm serve`, README.md) and set their URLs in config/paper_scmoa.yaml", "scmoa"))
    elif scmoa.get("models") and unreachable:
        out.append(MissingInput("SC-MoA model endpoint", f"{', '.join(unreachable)}: a loopback address the compute "
                                "nodes cannot reach; serve the models (`vllm serve`) where they can and set the URL "
                                "in config/paper_scmoa.yaml", "scmoa"))
    return out


class MissingInputError(ValueError):
    pass


def check_inputs(config: Mapping[str, Any], *, account: str | None = None,
                 workdir: str | os.PathLike | None = None) -> None:
    """Raise :class:`MissingInputError` listing every missing user-supplied input, and how to
    run the papers that do not need it."""
    missing = missing_inputs(config, account=account, workdir=workdir)
    if missing:
        papers = sorted({m.paper for m in missing if m.paper})
        lines = ["this run needs inputs only you can supply (README.md, \"Inputs only you can supply\"):",
                 *(m.line() for m in missing)]
        if papers:
            lines.append("Or run the other papers: " + "; ".join(WITHOUT[p] for p in papers)
                         + "; CoRE alone: --configfile config/paper.yaml")
        raise MissingInputError("\n".join(lines))


__all__ = ["MissingInput", "MissingInputError", "check_inputs", "cluster_account", "missing_inputs"]
