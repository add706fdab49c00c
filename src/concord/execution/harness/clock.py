"""How much of its time limit a unit of work has used (CPU, run-queue waits, wall clock). Standard library only."""

from __future__ import annotations

import time

from concord.execution.harness.base import _CLK_TCK, WALL_BACKSTOP


class _Clock:
    """How much of ``timeout`` the current unit of work has used: the larger of its CPU time and
    its wall-clock time less the time its processes waited for a CPU; plus a wall-clock backstop.

    CPU time comes from the worker's candidate cgroup when there is one (everything the candidate
    started), else from ``/proc/<pid>/stat`` of the candidate's processes."""

    def __init__(self, cpu_usage: str | None, pids: list[int], timeout: float) -> None:
        self.cpu_usage, self.pids, self.timeout = cpu_usage, pids, timeout
        self.restart()

    def restart(self) -> None:
        self.t0 = time.monotonic()
        self.cpu0 = self.cpu()
        self.wait0 = self.waited()

    def cpu(self) -> float:
        path = self.cpu_usage
        if path:
            try:
                with open(path) as f:
                    text = f.read()
                if path.endswith("cpu.stat"):  # cgroup v2: usage_usec
                    return int(text.split("usage_usec", 1)[1].split()[0]) / 1e6
                return int(text) / 1e9  # cgroup v1 cpuacct.usage: nanoseconds
            except (OSError, ValueError, IndexError):
                pass
        total = 0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            except (OSError, ValueError, IndexError):
                pass
        return total / _CLK_TCK

    def waited(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/schedstat") as f:
                    total += int(f.read().split()[1])  # run_delay: ns spent runnable but not running
            except (OSError, ValueError, IndexError):
                pass
        return total / 1e9

    def in_time(self) -> bool:
        """Is the unit of work still within its limit? Asked again when a result arrives, so a
        result read after the limit passed (this process was stopped, or descheduled, while it
        waited) is a timeout and never accepted late."""
        left, _ = self.left()
        return left > 0

    def left(self) -> tuple[float, str]:
        wall = time.monotonic() - self.t0
        backstop = WALL_BACKSTOP * self.timeout - wall
        if backstop <= 0:
            return 0.0, f"exceeded {self.timeout:g} s ({WALL_BACKSTOP:g}x wall-clock backstop)"
        waited = min(max(self.waited() - self.wait0, 0.0), wall)
        cpu = self.cpu() - self.cpu0
        used = max(cpu, wall - waited)
        if used >= self.timeout:
            return 0.0, f"exceeded {self.timeout:g} s"
        return max(min(self.timeout - used, backstop), 0.002), ""
