"""Sandboxed executions per second, and the sandbox's overhead over bare subprocesses.

    .venv/bin/python benchmarks/bench_sandbox.py [--programs 32] [--inputs 8] [--repeats 3] [--json out.json]

Workload: ``--programs`` small competitive-programming style stdin programs (loops, sorting,
dictionaries; 1-20 ms of work each) run on ``--inputs`` inputs each, with every core busy
(``--workers``, default all cores). One "execution" is one program on one input.

Three ways to run the identical workload, timed wall-clock, median of ``--repeats``:

* ``sandboxed``: :func:`concord.execution.run_programs` with the configured sandbox
  (bubblewrap when installed): namespaces, read-only filesystem, rlimits, dropped uid.
* ``bare harness``: the same harness process per candidate, started as a plain subprocess
  (no namespaces, no limits, no uid change). ``overhead = sandboxed / bare harness`` isolates
  the cost of the isolation itself; the target is <= 1.5x.
* ``bare per-input``: the naive way, one plain ``python -c program`` per (program, input),
  stdin piped in -- what a runner without a harness pays.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from concord.execution import Limits, _run_one, resolve_backend, run_programs  # noqa: E402
from concord.execution.sandbox import Backend, default_python  # noqa: E402

PROGRAMS = [
    "n = int(input())\nprint(sum(i * i for i in range(n)))",
    "n = int(input())\nxs = sorted((i * 7919) % 10007 for i in range(n))\nprint(xs[n // 2])",
    "n = int(input())\nd = {}\nfor i in range(n):\n    d[i % 97] = d.get(i % 97, 0) + i\nprint(max(d.values()))",
    "import sys\nn = int(sys.stdin.readline())\nprint(' '.join(str(i) for i in range(min(n, 50))))",
    "n = int(input())\nfib = [0, 1]\nfor _ in range(n):\n    fib.append((fib[-1] + fib[-2]) % 1000000007)\nprint(fib[n])",
    "from collections import Counter\nn = int(input())\nc = Counter(str(i)[-1] for i in range(n))\nprint(c.most_common(1)[0][0])",
]


def workload(n_programs: int, n_inputs: int) -> tuple[list[str], list[str]]:
    programs = [PROGRAMS[i % len(PROGRAMS)] + f"\n# variant {i}" for i in range(n_programs)]
    inputs = [str(2000 + 3000 * k) for k in range(n_inputs)]
    return programs, inputs


def time_sandboxed(programs, inputs, limits, workers, sandbox):
    t0 = time.perf_counter()
    out = run_programs(programs, inputs, mode="stdin", timeout_s=limits.timeout_s, memory_mb=limits.memory_mb,
                       workers=workers, sandbox=sandbox)
    dt = time.perf_counter() - t0
    return dt, out


def time_bare_harness(programs, inputs, limits, workers, python):
    bare = Backend(name="none", python=python, privileged=False, hide=(), keep=(), tmp_bytes=0)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        out = list(pool.map(lambda p: _run_one(bare, p, inputs, "stdin", None, limits, uid_slot=0), programs))
    return time.perf_counter() - t0, out


def time_bare_per_input(programs, inputs, workers, python):
    jobs = [(p, x) for p in programs for x in inputs]

    def run(job):
        program, text = job
        return subprocess.run([python, "-c", program], input=text, capture_output=True, text=True, timeout=60).stdout

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        out = list(pool.map(run, jobs))
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=32)
    ap.add_argument("--inputs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--sandbox", default=None, help="auto | bwrap | unshare (default: $CONCORD_SANDBOX or auto)")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args(argv)

    workers = args.workers or len(os.sched_getaffinity(0))
    programs, inputs = workload(args.programs, args.inputs)
    limits = Limits(timeout_s=10.0, memory_mb=512)
    backend = resolve_backend(args.sandbox)
    python = default_python()
    n_exec = len(programs) * len(inputs)

    sandboxed, harness, per_input = [], [], []
    reference = None
    for _ in range(args.repeats):
        dt, out = time_sandboxed(programs, inputs, limits, workers, backend.name)
        outputs = [[o.output for o in row] for row in out]
        if any(o.status != "ok" for row in out for o in row):
            raise SystemExit(f"sandboxed run had failures: {out}")
        reference = reference or outputs
        sandboxed.append(dt)
        dt, out = time_bare_harness(programs, inputs, limits, workers, python)
        if [[o.output for o in row] for row in out] != reference:
            raise SystemExit("bare harness disagrees with the sandbox")
        harness.append(dt)
        dt, _ = time_bare_per_input(programs, inputs, workers, python)
        per_input.append(dt)

    med = {name: statistics.median(v) for name, v in
           (("sandboxed", sandboxed), ("bare_harness", harness), ("bare_per_input", per_input))}
    result = {
        "backend": backend.name,
        "workers": workers,
        "programs": len(programs),
        "inputs": len(inputs),
        "executions": n_exec,
        "repeats": args.repeats,
        "seconds": med,
        "executions_per_second": {k: n_exec / v for k, v in med.items()},
        "overhead_vs_bare_harness": med["sandboxed"] / med["bare_harness"],
        "overhead_vs_bare_per_input": med["sandboxed"] / med["bare_per_input"],
        "target_overhead": 1.5,
    }
    print(f"backend={backend.name} workers={workers} executions={n_exec} ({len(programs)} programs x {len(inputs)} inputs), "
          f"median of {args.repeats}")
    for key in ("sandboxed", "bare_harness", "bare_per_input"):
        print(f"  {key:15s} {med[key]:7.2f} s  {n_exec / med[key]:8.1f} executions/s")
    print(f"  overhead sandboxed / bare harness   = {result['overhead_vs_bare_harness']:.2f}x (target <= 1.5x)")
    print(f"  overhead sandboxed / bare per-input = {result['overhead_vs_bare_per_input']:.2f}x")
    if args.json:
        from concord import io

        io.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
