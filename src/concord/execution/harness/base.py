"""Shared by every part of the sandbox's inside: the interpreter prelude, limits, flags and the C library.

Each part of :mod:`concord.execution.harness` imports what it uses from the parts before it;
those imports are dropped when the parts are joined into the one source the sandbox runs, where
they share one namespace. Standard library only.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

# LiveCodeBench's ``import_string``: every candidate runs after it, so programs may use these
# names without importing them. Imported here once, so that forked children start warm.
PRELUDE = """\
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string
import re
import datetime
import collections
import heapq
import bisect
import copy
import math
import random
import statistics
import itertools
import functools
import operator
import io
import sys
import json
sys.setrecursionlimit(50000)
"""

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
CLONE_PARENT, CLONE_CHILD_SETTID, CLONE_CHILD_CLEARTID = 0x00008000, 0x01000000, 0x00200000
# clone(2): the syscall number, and whether child_tid comes before tls (x86_64) or after (arm64)
_CLONE_ABI = {"x86_64": (56, True), "aarch64": (220, False)}
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_CAPBSET_DROP = 4, 36, 24
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
DEFAULT_RECURSION_LIMIT = sys.getrecursionlimit()  # read before the prelude raises it
SETUP_FAILED = 121  # exit status of a child whose isolation could not be set up (before candidate code)
STATUS_FD = 6  # the check server's /proc/self/status, opened before /proc is detached (checks._serve_checks)
OUTPUT_SLACK = 64 * 1024  # bytes of framing and stray fd-1 writes allowed on top of max_output_bytes
STDERR_KEEP, STDERR_READ = 8192, 1 << 20  # stderr kept for messages / read at all (then drained unread)
WALL_BACKSTOP = 3.0  # x timeout_s: wall-clock limit whatever the CPU accounting says
MAX_DEPTH = 100_000  # nesting of a return value the encoder follows (Python's == goes as deep)
HEADER_MAX = 16 * 1024  # bytes of a frame header (a short JSON object; its error text is <= 300 chars)
ERROR_KEEP = 1000  # characters of a reported error message passed on
SIGPENDING = 1024  # queued signals (and POSIX timers) per candidate: RLIMIT_SIGPENDING (see child._limits)
MEMLOCK = 8 << 20  # bytes a candidate may lock in memory (Linux's usual default; see child._limits)
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_LIBC.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_LIBC.personality.argtypes = [ctypes.c_ulong]
_CLK_TCK = os.sysconf("SC_CLK_TCK")
# Bound now: the zygote applies the reference harnesses' reliability guard, which sets these to
# None, and the sandbox's own code (a child's setup, the check server, the zygote's fallback
# fork) still needs them.
_chdir, _fork = os.chdir, os.fork


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


class _SeccompProgram(ctypes.Structure):
    """``struct sock_fprog``: a BPF filter (an array of ``struct sock_filter``, 8 bytes each)."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _seccomp_program(program_hex: str | None) -> _SeccompProgram | None:
    """The parent's filter (hex), made once in the zygote for every child: a ctypes class and a
    decoded copy made in each child cost it pages of the zygote's memory to copy."""
    if not program_hex:
        return None
    program = bytes.fromhex(program_hex)
    return _SeccompProgram(len(program) // 8, program)  # the structure keeps ``program`` alive


def _seccomp(program: _SeccompProgram) -> None:
    """Install a filter made by :func:`_seccomp_program`."""
    _check(_LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0), "seccomp")


class _CollectorTotals:
    """A full collection that leaves the totals ``gc.get_stats()`` reports as they were.

    CPython has no call to reset them, so they are found once, in the interpreter's own state:
    the nine words (collections, collected, uncollectable of each generation) that equal what
    ``gc.get_stats()`` reports, looked for near the interpreter state within its own mapping,
    and accepted only when a collection moves exactly them and writing them back is what
    ``gc.get_stats()`` then reports. Elsewhere (another interpreter, or no unique match) a plain
    ``gc.collect()``, whose totals a child can read."""

    def __init__(self) -> None:
        self.words = None
        try:
            self.words = self._find()
        except Exception:  # noqa: BLE001 -- a plain collection then
            self.words = None

    @staticmethod
    def _totals() -> list:
        return [int(g[k]) for g in gc.get_stats() for k in ("collections", "collected", "uncollectable")]

    def _find(self):
        get = ctypes.pythonapi.PyInterpreterState_Get
        get.restype = ctypes.c_void_p
        start = get()
        end = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                if low <= start < high:
                    end = min(high, start + (1 << 20))
                    break
        if end is None:
            return None
        gc.collect()  # now each generation's count of collections differs: a pattern hard to meet by chance
        want = self._totals()
        size = ctypes.sizeof(ctypes.c_ssize_t)
        memory = ctypes.string_at(start, end - start)
        pattern = b"".join(int(x).to_bytes(size, "little", signed=True) for x in want)
        at = memory.find(pattern)
        if at < 0 or at % size or memory.find(pattern, at + 1) >= 0:
            return None
        words = (ctypes.c_ssize_t * len(want)).from_address(start + at)
        gc.collect()
        after = self._totals()
        if list(words) != after or after == want:
            return None
        words[:] = want
        return words if self._totals() == want else None

    def collect(self) -> None:
        if self.words is None:
            gc.collect()
            return
        saved = list(self.words)
        gc.collect()
        self.words[:] = saved


#: The totals' place, found by the first zygote before it serves (``harness.zygote._serve``) and
#: inherited by every process cloned from it (its second zygote, check servers, children).
_TOTALS: list = []


def _collect() -> None:
    """``gc.collect()`` that leaves the totals ``gc.get_stats()`` reports as they were (where
    :class:`_CollectorTotals` found them): a zygote's or a check server's collections would
    otherwise tell every process cloned from it how much work came before (sixteenth red team)."""
    if _TOTALS and _TOTALS[0].words is not None:
        _TOTALS[0].collect()
    else:
        gc.collect()
