"""The entry point the sandbox runs: a fixed address-space layout, the runner's start-up and its
request loop. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys

from concord.execution.harness.base import _LIBC, DEFAULT_RECURSION_LIMIT, PRELUDE
from concord.execution.harness.runner import _Runner


def _fixed_layout() -> None:
    """Re-execute this interpreter once with address-space randomisation off, so that every
    address a candidate can print (``<generator object f at 0x...>``, ``object()``, ``id()``) is
    the same on every run of the same job: a rerun reproduces its outputs byte for byte. The
    personality flag survives ``execve`` and ``fork``; setting it needs no privilege."""
    no_randomize = 0x0040000  # ADDR_NO_RANDOMIZE
    current = _LIBC.personality(0xFFFFFFFF)  # query
    argv = getattr(sys, "orig_argv", None)
    if current == -1 or current & no_randomize or not argv:
        return
    if _LIBC.personality(current | no_randomize) == -1:
        return
    os.execv(sys.executable, argv)


def main() -> None:
    _fixed_layout()
    runner = _Runner()
    exec(compile(PRELUDE, "<prelude>", "exec"), {})  # warm every prelude module for the children
    # The prelude raises the limit to 50,000 for candidates; the trusted runner keeps Python's
    # default, so nothing it parses can recurse deep enough to overflow its C stack.
    sys.setrecursionlimit(DEFAULT_RECURSION_LIMIT)
    stdin = os.fdopen(0, "rb", buffering=0)  # unbuffered: nothing of a job is read ahead before the zygote forks
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # stray prints of ours must never look like events
    os.close(null)
    hello = json.loads(_readline(stdin))
    try:
        runner.setup(hello)
    except OSError as exc:
        runner.emit({"event": "failed", "error": str(exc)})
        return
    del hello
    runner.emit({"event": "ready"})
    stdin = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    for line in stdin:
        job = json.loads(line)
        try:
            runner.run(job)
        except Exception as exc:  # noqa: BLE001 -- our failure, reported to the parent
            runner.emit({"event": "failed", "id": job.get("id"), "error": f"{type(exc).__name__}: {exc}"})
            return


def _readline(stream) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = stream.read(1)
        if not chunk:
            break
        line += chunk
    return bytes(line)

