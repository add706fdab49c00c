"""The one way tests run real Snakemake: ``python -m snakemake`` in a subprocess, in the test's
interpreter, with the environment every workflow job needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from support import REPO

SNAKEFILE = REPO / "Snakefile"


def job_env(**extra: str) -> dict[str, str]:
    """The test's environment for Snakemake and the jobs it starts: this interpreter's bin first on
    PATH (rules call ``python``), the checkout's src importable, the Hugging Face hub offline."""
    pythonpath = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", **extra}


def snakemake(workdir: str | os.PathLike, *args: str, config: dict | str | os.PathLike | None = None,
              snakefile: str | os.PathLike | None = SNAKEFILE, env: dict[str, str] | None = None,
              timeout: float = 1500, check: bool = False, background: bool = False):
    """Run Snakemake in ``workdir``; the completed process (output captured as text), or the
    running ``Popen`` (stdout and stderr merged, its own process group) with ``background``.

    ``snakefile``: the workflow, run with ``--directory workdir`` (the repository's by default;
    None: the ``Snakefile`` in ``workdir``, or whatever ``args`` name, as ``snakemake`` typed in
    that directory). ``config``: a dict is written to ``workdir/config.yaml``; a dict or a path is
    passed as the last ``--configfile`` (last, so it cannot swallow targets). ``env``: the whole
    environment (default :func:`job_env`). ``check``: assert that Snakemake succeeded.
    """
    workdir = Path(workdir)
    cmd = [sys.executable, "-m", "snakemake"]
    if snakefile is not None:
        cmd += ["--snakefile", str(snakefile), "--directory", str(workdir)]
    cmd += list(args)
    if isinstance(config, dict):
        path = workdir / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        config = path
    if config is not None:
        cmd += ["--configfile", str(config)]
    env = job_env() if env is None else env
    if background:
        return subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return proc
