"""The entry point the sandbox runs: the runner's start-up and its request loop. Standard library only."""

from __future__ import annotations

import gc
import json
import os
import sys

from concord.execution.harness.base import _LIBC, DEFAULT_RECURSION_LIMIT, PRELUDE
from concord.execution.harness.runner import _Runner


def main() -> None:
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
    _compact()
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


def _compact() -> None:
    """Give back the memory that compiling this program and importing the prelude left free,
    before the zygote is forked: every page still mapped then is a page table entry each clone
    copies, and free memory a child allocates from is copied on its first write."""
    gc.collect()
    try:
        _LIBC.malloc_trim(0)  # glibc: free heap memory back to the system
    except AttributeError:  # another C library
        pass


def _readline(stream) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = stream.read(1)
        if not chunk:
            break
        line += chunk
    return bytes(line)

