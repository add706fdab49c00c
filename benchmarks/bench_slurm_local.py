"""Wall time of the embedded default's cluster subset through a local Slurm against a plain local
run, batch jobs, and the per-job overhead of going through Slurm.

    .venv/bin/python benchmarks/bench_slurm_local.py [--json out.json]

As root, on a machine with Debian packages (scripts/slurm_local.sh installs them): starts a
single-node Slurm in a temporary folder, copies the checkout twice, runs the targets
tests/test_slurm_local.py runs (a CoRE roll-out, a training and its evaluation, an FMV execution,
an SC-MoA run, with config/slurm_local.yaml) once with the README's `--profile slurm` line and
once with `--cores <all>`, and prints:

* wall time of each run (the same DAG, the same config);
* batch jobs submitted, and local jobs Snakemake ran itself (localrules);
* per batch job: Slurm's own queue wait (StartTime - SubmitTime), run time (EndTime - StartTime),
  and the overhead Snakemake sees = time from its "submitted" line to its "Finished" line minus
  Slurm's run time (status-check delay, queueing, the job step's start), median and max.

Slurm records are read with `scontrol show job` while they last (MinJobAge), polled every 5 s.
The cluster's daemons are stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from concord.cluster import local_slurm  # noqa: E402
from test_slurm_local import OVERRIDES, _copy_checkout, _env, _targets  # noqa: E402


def _ts(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


def _poll(env: dict, records: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        out = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", line))
            if "JobId" in fields:
                records[fields["JobId"]] = fields
        stop.wait(5)


def _timed_log(cmd: list[str], cwd: Path, env: dict) -> tuple[int, float, list[tuple[float, str]]]:
    """Run, timestamping each output line as it arrives."""
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.time(), line) for line in proc.stdout]
    return proc.wait(), time.time() - started, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    reason = local_slurm.cannot_start_reason()
    if reason:
        print(f"cannot start a local Slurm: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp:
        tmp = Path(tmp)
        layout = local_slurm.Layout(tmp / "slurm")
        try:
            facts = local_slurm.start(layout, local_slurm.Settings())
            env = _env(layout)
            slurm_dir, local_dir = _copy_checkout(tmp / "a"), _copy_checkout(tmp / "b")
            targets = _targets(slurm_dir, env)
            records: dict = {}
            stop = threading.Event()
            poller = threading.Thread(target=_poll, args=(env, records, stop), daemon=True)
            poller.start()
            rc, slurm_s, lines = _timed_log([sys.executable, "-m", "snakemake", *targets, *OVERRIDES], slurm_dir, env)
            stop.set()
            poller.join()
            local_env = {k: v for k, v in env.items() if k != "SLURM_CONF"}
            rc_local, local_s, local_lines = _timed_log(
                [sys.executable, "-m", "snakemake", *targets, "--cores", str(facts["cpus"]), "--configfile",
                 "config/config.yaml", "config/slurm_local.yaml"], local_dir, local_env)
        finally:
            local_slurm.stop(layout)
    if rc or rc_local:
        print("".join(line for _, line in (lines if rc else local_lines))[-4000:], file=sys.stderr)
        return 1
    submitted, finished, job_of = {}, {}, {}
    for t, line in lines:
        if m := re.search(r"Job (\d+) has been submitted with SLURM jobid (\d+)", line):
            submitted[m[2]] = t
            job_of[m[1]] = m[2]
        elif m := re.search(r"Finished jobid: (\d+)", line):
            if m[1] in job_of:
                finished[job_of[m[1]]] = t
    local_jobs = sum(1 for _, line in lines if line.startswith("localrule "))
    rows = []
    for jobid, t_sub in submitted.items():
        rec = records.get(jobid)
        if not rec or jobid not in finished or rec.get("StartTime") in (None, "Unknown"):
            continue
        run = _ts(rec["EndTime"]) - _ts(rec["StartTime"])
        rows.append({"jobid": jobid, "rule": rec.get("Comment", "").split("_wildcards")[0].removeprefix("rule_"),
                     "queue_s": _ts(rec["StartTime"]) - _ts(rec["SubmitTime"]), "run_s": run,
                     "overhead_s": finished[jobid] - t_sub - run})
    overhead = [r["overhead_s"] for r in rows]
    result = {"cpus": facts["cpus"], "load_1min": os.getloadavg()[0], "batch_jobs": len(submitted),
              "local_jobs": local_jobs, "slurm_wall_s": round(slurm_s, 1), "local_wall_s": round(local_s, 1),
              "overhead_median_s": round(statistics.median(overhead), 1) if overhead else None,
              "overhead_max_s": round(max(overhead), 1) if overhead else None, "jobs": rows}
    print(f"through Slurm: {slurm_s:.0f} s wall, {len(submitted)} batch jobs + {local_jobs} local jobs; "
          f"locally (--cores {facts['cpus']}): {local_s:.0f} s")
    if overhead:
        print(f"per batch job, Snakemake-observed minus Slurm run time: median {statistics.median(overhead):.0f} s, "
              f"max {max(overhead):.0f} s (n={len(overhead)}; load {result['load_1min']:.1f} on {facts['cpus']} CPUs)")
    for r in rows:
        print(f"  {r['jobid']:>4} {r['rule']:14} queue {r['queue_s']:5.0f} s  run {r['run_s']:5.0f} s  "
              f"overhead {r['overhead_s']:5.0f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
