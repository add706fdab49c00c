"""A single-node Slurm cluster on this machine: try `snakemake --profile slurm` before a cluster.

`python -m concord.cluster.local_slurm start|stop|status` (what `scripts/slurm_local.sh` runs):

* installs Debian's `slurm-wlm` and `munge` when missing (as root, through apt, with a
  `policy-rc.d` that keeps the packages' postinst from starting system services), and with
  `--accounting` also `slurmdbd` and `mariadb-server`;
* writes a munge key, `slurm.conf` (the node's real CPUs and memory as `slurmd -C` reports them,
  `DefMemPerCPU`, one partition, `EnforcePartLimits`), `gres.conf` with N fake GPUs (`File=`
  links to /dev/null: Slurm 22.05 drops file-less GPUs and marks the node INVAL) and, with
  accounting, a MariaDB data directory and `slurmdbd.conf`, all under one state folder;
* starts munged, (mariadbd, slurmdbd,) slurmctld and slurmd in the foreground of their own
  sessions on free ports, records their PIDs, and waits until the node is idle;
* `stop` cancels the cluster's jobs and stops exactly the daemons it recorded, by PID.

Everything lives in the state folder (default `$TMPDIR/concord-slurm`) except the Debian packages
and one symbolic link, /etc/slurm/slurm.conf -> the state folder's slurm.conf, made only where no
such file exists and removed by `stop`: inside a job, the executor plugin's job step drops every
`SLURM_*` variable (SLURM_CONF too) before it calls `srun`, which then reads the system path.
Removing it matters: with a slurm.conf in place and no controller running, every later
`snakemake` (even `-n`) waits ~10 s on the executor plugin's `scontrol show config`. Client
commands elsewhere find the cluster through the link or `SLURM_CONF`, which `start` prints as an
`export` line (`eval "$(scripts/slurm_local.sh start)"` sets it).

Standard library only: the script runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")
CLUSTER_NAME = "concord-local"
ACCOUNT = "concord"
# Jobs stay visible to squeue this long after they end: the executor plugin's squeue status
# command needs MinJobAge >= 3 x slurm-init-seconds-before-status-checks (it falls back to
# sacct otherwise, which fails without accounting).
MIN_JOB_AGE_S = 300
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")  # start order; stop reverses


class LocalSlurmError(RuntimeError):
    """The local cluster cannot be installed, started or reached (the message says why)."""


@dataclass
class Layout:
    """Every path of one local cluster, under its state folder."""

    root: Path

    def __post_init__(self):
        self.root = Path(self.root).resolve()

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def state_file(self) -> Path:
        return self.root / "cluster.json"

    def pid_file(self, daemon: str) -> Path:
        return self.root / "run" / f"{daemon}.pid"

    def log_file(self, daemon: str) -> Path:
        return self.root / "log" / f"{daemon}.log"


def default_state_dir() -> Path:
    return Path(os.environ.get("CONCORD_SLURM_DIR") or Path(tempfile.gettempdir()) / "concord-slurm")


# ---- packages -----------------------------------------------------------------------------


def missing_packages(accounting: bool) -> list[str]:
    """Debian packages whose programs are absent (by program, so any install method counts)."""
    programs = {"slurm-wlm": ("slurmctld", "slurmd", "sbatch"), "munge": ("munged",),
                "slurmdbd": ("slurmdbd",), "mariadb-server": ("mariadbd", "mariadb-install-db")}
    wanted = PACKAGES + (ACCOUNTING_PACKAGES if accounting else ())
    return [p for p in wanted if not all(_which(prog) for prog in programs[p])]


def _which(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin:/usr/bin")


def cannot_start_reason(accounting: bool = False) -> str | None:
    """Why a local cluster cannot be started here (None when it can): used by tests to skip."""
    missing = missing_packages(accounting)
    if not missing:
        return None if os.geteuid() == 0 else "the local Slurm runs its daemons as root (not root here)"
    if os.geteuid() != 0:
        return f"Debian packages {', '.join(missing)} are missing and installing them needs root"
    if not shutil.which("apt-get"):
        return f"Debian packages {', '.join(missing)} are missing and there is no apt-get"
    return None


def install_packages(accounting: bool) -> None:
    missing = missing_packages(accounting)
    if not missing:
        return
    reason = cannot_start_reason(accounting)
    if reason:
        raise LocalSlurmError(reason)
    # Debian's postinst scripts start munge/slurm/mariadb services through invoke-rc.d unless a
    # policy-rc.d refuses (exit 101); we start our own daemons, with our own files.
    policy = Path("/usr/sbin/policy-rc.d")
    ours = not policy.exists()
    if ours:
        policy.write_text("#!/bin/sh\n# written by concord's local_slurm during apt-get install\nexit 101\n")
        policy.chmod(0o755)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
    try:
        print(f"[slurm-local] installing {' '.join(missing)} (apt-get)", file=sys.stderr)
        if subprocess.run(cmd, env=env, capture_output=True, text=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, text=True)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise LocalSlurmError(f"apt-get install {' '.join(missing)} failed:\n{proc.stderr[-2000:]}")
    finally:
        if ours:
            policy.unlink(missing_ok=True)


# ---- configuration ------------------------------------------------------------------------


def node_facts() -> dict[str, str]:
    """The node line `slurmd -C` prints (real CPUs, topology, memory), as a dict."""
    out = subprocess.run([_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    return dict(item.split("=", 1) for item in line.split())


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class Settings:
    gpus: int = 2
    partition: str = "local"
    accounting: bool = False


def write_config(layout: Layout, settings: Settings) -> dict:
    """Write every configuration file; return the cluster's facts (also saved as cluster.json)."""
    facts = node_facts()
    node, cpus, memory = facts["NodeName"], int(facts["CPUs"]), int(facts["RealMemory"])
    ctld_port, slurmd_port, dbd_port, db_port = _free_ports(4)
    for sub in ("etc", "munge", "run", "log", "spool/ctld", "spool/d", "dev", "jobs"):
        (layout.root / sub).mkdir(parents=True, exist_ok=True)
    layout.root.chmod(0o755)
    (layout.root / "munge").chmod(0o700)

    key = layout.root / "munge" / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o400)

    gpu_files = []
    for i in range(settings.gpus):
        link = layout.root / "dev" / f"gpu{i}"
        if not link.is_symlink():
            link.symlink_to("/dev/null")
        gpu_files.append(str(link))

    topology = " ".join(f"{k}={facts[k]}" for k in ("Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
                        if k in facts)
    gres = f" Gres=gpu:{settings.gpus}" if settings.gpus else ""
    if settings.accounting:
        accounting = (f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
                      f"AccountingStoragePort={dbd_port}\nAccountingStorageTRES=gres/gpu\n"
                      # the munge socket for talking to slurmdbd (AuthInfo covers slurmctld/slurmd only)
                      f"AccountingStoragePass={layout.munge_socket}\n"
                      "JobAcctGatherType=jobacct_gather/linux\n")
    else:
        accounting = "AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n"
    layout.slurm_conf.write_text(
        f"# A single-node Slurm cluster written by concord.cluster.local_slurm (state: {layout.root}).\n"
        f"ClusterName={CLUSTER_NAME}\n"
        f"SlurmctldHost={node}(127.0.0.1)\nSlurmctldPort={ctld_port}\nSlurmdPort={slurmd_port}\n"
        f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={layout.munge_socket}\n"
        "SlurmUser=root\nSlurmdUser=root\n"
        f"StateSaveLocation={layout.root}/spool/ctld\nSlurmdSpoolDir={layout.root}/spool/d\n"
        f"SlurmctldPidFile={layout.root}/run/slurmctld.slurm.pid\nSlurmdPidFile={layout.root}/run/slurmd.slurm.pid\n"
        f"SlurmctldLogFile={layout.log_file('slurmctld')}\nSlurmdLogFile={layout.log_file('slurmd')}\n"
        # No systemd/cgroups in a container: track processes by their parent chain.
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
        # Allocate single CPUs (not whole cores) and memory, so small jobs share the node.
        "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU_Memory\nSchedulerType=sched/backfill\n"
        "GresTypes=gpu\nReturnToService=2\nJobCompType=jobcomp/none\n"
        # A job asking more than the node has is refused at sbatch instead of PENDING forever.
        "EnforcePartLimits=ALL\n"
        f"MinJobAge={MIN_JOB_AGE_S}\n"
        # Without DefMemPerCPU a job with no --mem takes the whole node's memory.
        f"DefMemPerCPU={memory // cpus}\n"
        "SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=5\n"
        + accounting
        + f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} {topology} RealMemory={memory}{gres} State=UNKNOWN\n"
        f"PartitionName={settings.partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP\n"
    )
    (layout.etc / "gres.conf").write_text(
        "".join(f"NodeName={node} Name=gpu File={f}\n" for f in gpu_files)
    )
    cluster = {"state_dir": str(layout.root), "slurm_conf": str(layout.slurm_conf), "node": node, "cpus": cpus,
               "memory_mb": memory, "gpus": settings.gpus, "partition": settings.partition,
               "accounting": settings.accounting, "account": ACCOUNT if settings.accounting else None,
               "ports": {"slurmctld": ctld_port, "slurmd": slurmd_port, "slurmdbd": dbd_port, "mariadb": db_port}}
    if settings.accounting:
        _write_dbd_config(layout, node, dbd_port, db_port)
    layout.state_file.write_text(json.dumps(cluster, indent=2) + "\n")
    return cluster


def _db_password(layout: Layout) -> str:
    """A random password for slurmdbd's MariaDB user, kept (mode 600) in the state folder."""
    path = layout.etc / "db.pass"
    if not path.exists():
        path.write_text(os.urandom(12).hex())
        path.chmod(0o600)
    return path.read_text().strip()


def _write_dbd_config(layout: Layout, node: str, dbd_port: int, db_port: int) -> None:
    conf = layout.etc / "slurmdbd.conf"
    conf.write_text(
        f"AuthType=auth/munge\nAuthInfo=socket={layout.munge_socket}\nDbdHost={node}\nDbdAddr=127.0.0.1\n"
        f"DbdPort={dbd_port}\nSlurmUser=root\nPidFile={layout.root}/run/slurmdbd.slurm.pid\n"
        f"LogFile={layout.log_file('slurmdbd')}\nStorageType=accounting_storage/mysql\n"
        f"StorageHost=127.0.0.1\nStoragePort={db_port}\nStorageUser=slurm\nStoragePass={_db_password(layout)}\n"
        "StorageLoc=slurm_acct_db\n"
    )
    conf.chmod(0o600)  # slurmdbd refuses a config readable by others


# ---- daemons ------------------------------------------------------------------------------


def _env(layout: Layout) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(layout.slurm_conf)}


def _spawn(layout: Layout, daemon: str, argv: list[str]) -> int:
    log = open(layout.log_file(daemon) if daemon in ("munged", "mariadbd") else layout.root / "log" / f"{daemon}.out", "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=_env(layout), start_new_session=True, cwd=layout.root)
    layout.pid_file(daemon).write_text(f"{proc.pid}\n")
    _STARTED[daemon] = proc
    return proc.pid


# The daemons this process started: whether one exited is read from its Popen (a process's
# /proc/PID/cmdline can read empty for a moment after exec, on some kernels).
_STARTED: dict[str, subprocess.Popen] = {}


def _alive(pid: int, daemon: str) -> bool:
    """The process exists and is still that daemon (PIDs are recycled)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    if stat.split(")")[-1].split()[0] == "Z":
        return False
    return not cmdline or daemon in Path(cmdline).name


def _pid(layout: Layout, daemon: str) -> int | None:
    try:
        return int(layout.pid_file(daemon).read_text())
    except (FileNotFoundError, ValueError):
        return None


def _wait(what: str, check, timeout: float, log: Path | None = None, daemon: tuple | None = None) -> None:
    """Poll `check` until it holds; fail at once if `daemon` (layout, name) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if daemon and daemon[1] in _STARTED and _STARTED[daemon[1]].poll() is not None:
            timeout = time.monotonic() - deadline + timeout
            what = f"{what} ({daemon[1]} exited)"
            break
        time.sleep(0.2)
    tail = ""
    if log and log.exists():
        tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    raise LocalSlurmError(f"{what} did not happen within {timeout:.0f} s{tail}")


def _run(layout: Layout, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), env=_env(layout), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LocalSlurmError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return proc


def _start_mariadb(layout: Layout, port: int) -> None:
    data = layout.root / "mysql"
    sock = layout.root / "run" / "mysqld.sock"
    if not (data / "mysql").is_dir():
        data.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                               "--auth-root-authentication-method=normal", "--skip-test-db"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise LocalSlurmError(f"mariadb-install-db failed: {proc.stderr[-1500:]}")
    _spawn(layout, "mariadbd", [_which("mariadbd"), "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                f"--port={port}", "--bind-address=127.0.0.1", "--user=root",
                                f"--pid-file={layout.root}/run/mariadbd.own.pid", "--skip-name-resolve",
                                "--innodb-buffer-pool-size=64M", f"--log-error={layout.log_file('mariadbd')}"])
    _wait("MariaDB accepting connections", lambda: sock.exists() and _port_open(port), 60, layout.log_file("mariadbd"),
          (layout, "mariadbd"))
    # slurmdbd connects over TCP (from 127.0.0.1) as its own user.
    password = _db_password(layout)
    grant = subprocess.run([_which("mariadb") or "mariadb", "--no-defaults", f"--socket={sock}", "-u", "root", "-e",
                            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
                            "GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"],
                           capture_output=True, text=True)
    if grant.returncode != 0:
        raise LocalSlurmError(f"granting slurmdbd access to MariaDB failed: {grant.stderr.strip()}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


SYSTEM_CONF = Path("/etc/slurm/slurm.conf")


def _left_by_a_dead_cluster(link: Path) -> bool:
    """``link`` points to a configuration this module wrote for a cluster whose controller is no
    longer running: a run killed before it could stop its cluster (``kill -9`` of a test session)
    left it, and every later cluster refused to start beside it."""
    target = Path(os.readlink(link))
    try:
        head = target.read_text().split("\n", 1)[0]
        pid = int((target.parent.parent / "run" / "slurmctld.slurm.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    if "written by concord.cluster.local_slurm" not in head:
        return False
    try:
        return b"slurmctld" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def _link_system_conf(layout: Layout) -> None:
    if SYSTEM_CONF.is_symlink() and not SYSTEM_CONF.exists():
        SYSTEM_CONF.unlink()  # a link left by a cluster whose state folder is gone
    if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) != layout.slurm_conf and _left_by_a_dead_cluster(SYSTEM_CONF):
        SYSTEM_CONF.unlink()
    if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == layout.slurm_conf:
        return
    if SYSTEM_CONF.exists() or SYSTEM_CONF.is_symlink():
        raise LocalSlurmError(f"{SYSTEM_CONF} exists (another Slurm configuration): jobs' srun would read it "
                              "instead of this cluster's; stop that cluster or move the file")
    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(layout.slurm_conf)


def _unlink_system_conf(layout: Layout) -> None:
    if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == layout.slurm_conf:
        SYSTEM_CONF.unlink()


def start(layout: Layout, settings: Settings) -> dict:
    """Install what is missing, write the configuration, start every daemon; the cluster's facts."""
    if status(layout)["running"]:
        raise LocalSlurmError(f"a local cluster is already running from {layout.root} (stop it first)")
    install_packages(settings.accounting)
    cluster = write_config(layout, settings)
    ports = cluster["ports"]
    try:
        _link_system_conf(layout)
        for attempt in range(3):  # munged now and then exits at once right after a previous one stopped
            _spawn(layout, "munged", [_which("munged"), "--foreground", "--force",
                                      f"--key-file={layout.root}/munge/munge.key", f"--socket={layout.munge_socket}",
                                      f"--pid-file={layout.root}/run/munged.own.pid",
                                      f"--log-file={layout.log_file('munged')}", f"--seed-file={layout.root}/munge/munge.seed"])
            try:
                _wait("munged listening", layout.munge_socket.exists, 15, layout.log_file("munged"), (layout, "munged"))
                break
            except LocalSlurmError:
                if attempt == 2:
                    raise
                stop(layout)  # nothing of this attempt stays behind
                time.sleep(1)
        if settings.accounting:
            _start_mariadb(layout, ports["mariadb"])
            # slurmdbd reads slurmdbd.conf beside $SLURM_CONF (it has no -f)
            _spawn(layout, "slurmdbd", [_which("slurmdbd"), "-D"])
            _wait("slurmdbd listening", lambda: _port_open(ports["slurmdbd"]), 60, layout.log_file("slurmdbd"), (layout, "slurmdbd"))
            _run(layout, "sacctmgr", "-i", "add", "cluster", CLUSTER_NAME, check=False)
        _spawn(layout, "slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(layout.slurm_conf)])
        _wait("slurmctld answering", lambda: _run(layout, "scontrol", "ping", check=False).returncode == 0, 30,
              layout.log_file("slurmctld"), (layout, "slurmctld"))
        _spawn(layout, "slurmd", [_which("slurmd"), "-D", "-f", str(layout.slurm_conf), "-N", cluster["node"]])
        _wait(f"node {cluster['node']} idle", lambda: _node_state(layout, cluster["node"]).startswith("IDLE"), 60,
              layout.log_file("slurmd"), (layout, "slurmd"))
        if settings.accounting:
            _run(layout, "sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER_NAME}", check=False)
            _run(layout, "sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}", f"cluster={CLUSTER_NAME}",
                 check=False)
            _wait("sacct answering", lambda: _run(layout, "sacct", "-n", check=False).returncode == 0, 30)
    except BaseException:
        stop(layout)
        raise
    return cluster


def _node_state(layout: Layout, node: str) -> str:
    proc = _run(layout, "sinfo", "-h", "-N", "-n", node, "-o", "%T", check=False, timeout=15)
    return proc.stdout.strip().upper() if proc.returncode == 0 else ""


def stop(layout: Layout) -> list[str]:
    """Cancel the cluster's jobs, then stop the daemons it recorded (by PID, in reverse start
    order); the names of those that were stopped."""
    if _pid(layout, "slurmctld") and _alive(_pid(layout, "slurmctld"), "slurmctld"):
        _run(layout, "scancel", "--full", "--user", "root", check=False, timeout=15)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            queue = _run(layout, "squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i", check=False, timeout=15)
            if queue.returncode != 0 or not queue.stdout.strip():
                break
            time.sleep(0.5)
    stopped = []
    for daemon in reversed(DAEMONS):
        pid = _pid(layout, daemon)
        if pid is None:
            continue
        if _alive(pid, daemon):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while _alive(pid, daemon) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid, daemon):
                os.kill(pid, signal.SIGKILL)
            stopped.append(daemon)
        layout.pid_file(daemon).unlink(missing_ok=True)
    _unlink_system_conf(layout)
    return stopped


def status(layout: Layout) -> dict:
    running = {d: pid for d in DAEMONS if (pid := _pid(layout, d)) and _alive(pid, d)}
    result = {"state_dir": str(layout.root), "running": running}
    if layout.state_file.exists():
        result["cluster"] = json.loads(layout.state_file.read_text())
    if "slurmctld" in running and "cluster" in result:
        result["node_state"] = _node_state(layout, result["cluster"]["node"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slurm_local.sh", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="folder for configuration, state and logs (default $CONCORD_SLURM_DIR or $TMPDIR/concord-slurm)")
    parser.add_argument("--gpus", type=int, default=2, help="fake GPUs on the node (default 2)")
    parser.add_argument("--partition", default="local", help="partition name (default local)")
    parser.add_argument("--accounting", action="store_true", help="also start slurmdbd + MariaDB (sacct works)")
    args = parser.parse_args(argv)
    layout = Layout(args.state_dir or default_state_dir())
    try:
        if args.action == "start":
            cluster = start(layout, Settings(gpus=args.gpus, partition=args.partition, accounting=args.accounting))
            print(f"[slurm-local] node {cluster['node']}: {cluster['cpus']} CPUs, {cluster['memory_mb']} MB, "
                  f"{cluster['gpus']} fake GPUs; partition {cluster['partition']}; accounting "
                  f"{'on (sacct works; account ' + ACCOUNT + ')' if cluster['accounting'] else 'off (use squeue)'}; "
                  f"logs {layout.root / 'log'}", file=sys.stderr)
            print(f"export SLURM_CONF={layout.slurm_conf}")
        elif args.action == "stop":
            stopped = stop(layout)
            print(f"[slurm-local] stopped {', '.join(stopped) or 'nothing (no daemon was running)'}", file=sys.stderr)
            print("unset SLURM_CONF")
        else:
            print(json.dumps(status(layout), indent=2))
    except LocalSlurmError as error:
        print(f"slurm_local: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
