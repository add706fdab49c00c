"""Sandboxed execution of candidate programs, graded as HumanEval and LiveCodeBench grade them.

``run_programs(programs, inputs, mode=...)`` runs every program on every input and returns an
N x K matrix of :class:`Outcome`. The parts:

* :mod:`~concord.execution.runner` -- the trusted parent: a pool of sandboxed workers, the
  protocol to them, :func:`run_programs`;
* :mod:`~concord.execution.harness` -- what runs inside a sandbox: a trusted runner and a pristine
  zygote that forks one isolated child per unit of work (own PID, mount and IPC namespaces,
  seccomp); the child runs candidate code the way the reference harness does (modes ``stdin``,
  ``call``, ``humaneval``);
* :mod:`~concord.execution.sandbox` -- the bubblewrap sandbox and its allow-listed filesystem;
* :mod:`~concord.execution.seccomp` -- the libseccomp filter every candidate child installs;
* :mod:`~concord.execution.cgroups` -- per-candidate memory/process/CPU totals (cgroups v2 or v1,
  or rlimits with one warning);
* :mod:`~concord.execution.literals` -- the trusted side's linear, hash-free reader of return
  values (canonical text, ``==`` against JSON);
* :mod:`~concord.execution.normalize` -- trusted-side normalisation of outputs (what the vote
  compares, exactly);
* :mod:`~concord.execution.compare` -- LiveCodeBench's grading comparison of an output with an
  expected output;
* ``docs/sandbox.md`` -- threat model and measure for each;
* :mod:`~concord.execution.outcome` -- :class:`Outcome`, :class:`Limits`, the modes.
"""

from concord.execution.compare import outputs_match
from concord.execution.normalize import (
    canonical_value,
    normalize_stdout,
    normalize_value,
    parse_call_input,
    parse_value,
)
from concord.execution.outcome import MODES, REPR_PREFIX, STATUSES, Limits, Outcome, normalize_mode
from concord.execution.runner import run_checks, run_programs, uid_block
from concord.execution.runner import resolve_backend
from concord.execution.sandbox import SandboxError, SandboxUnavailable

__all__ = [
    "Outcome",
    "Limits",
    "MODES",
    "STATUSES",
    "REPR_PREFIX",
    "run_checks",
    "run_programs",
    "uid_block",
    "outputs_match",
    "normalize_stdout",
    "normalize_value",
    "canonical_value",
    "parse_value",
    "parse_call_input",
    "normalize_mode",
    "SandboxError",
    "SandboxUnavailable",
    "resolve_backend",
]
