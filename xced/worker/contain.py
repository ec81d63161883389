"""Containment of a job's processes (JOB-1, JOB-2; issue 15): every process a job starts is
found, counted toward its memory limit, and ends with it, even one that left the job's
process group or session (``setsid``, a double-forked daemon).

STDLIB ONLY: shared by the supervisor (which must stay light) and ``xced.worker.procs``.

Three mechanisms, the strongest available chosen per job (``detect``):

- ``"cgroup-v2"``: a cgroup of the unified hierarchy per job, where it offers the memory
  controller and the daemon runs as root. ``memory.max`` is the job's limit (the kernel
  enforces it; an OOM kill shows in ``memory.events``' ``oom_kill``), ``cgroup.kill`` ends
  every member at once. As Slurm's proctrack/cgroup and task/cgroup with cgroup/v2.
- ``"cgroup-v1"``: the v1 ``memory`` hierarchy (``memory.limit_in_bytes``; an OOM kill is
  counted in ``memory.oom_control``'s ``oom_kill``) plus ``freezer`` (or ``pids``) for
  membership; a kill freezes the cgroup, SIGKILLs every member of ``cgroup.procs`` and
  thaws it, so nothing forks meanwhile. As Slurm's cgroup/v1 plugins and LSF's
  ``LSB_RESOURCE_ENFORCE="memory"`` with ``LSF_PROCESS_TRACKING``.
- ``"subreaper"``: always there, no root needed. The supervisor is a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so an orphaned descendant is re-parented to it
  rather than to init, and the supervisor's descendants, found through /proc, are exactly
  the job's processes. The cgroup mechanisms keep the subreaper on as well.

Each job's cgroups are ``<hierarchy>/<the supervisor's own cgroup>/xce/<key>/job_<id>_<index>``
(``key``: 12 hex digits of a hash of ``<TopDir>/jobs``, so two TopDirs never share one; a
task run by ``xcecli launch`` under its own supervisor gets ``job_<id>_<index>_task_<n>``),
made before the job's first instruction and removed after its last process is gone.

``XCE_CONTAINMENT`` in the daemon's environment (``auto``, the default, or ``subreaper``)
turns cgroups off for a cluster or a test.

The record a supervisor keeps in JOBDIR/contain.json (rewritten whenever the set of the
job's processes changes) lets the worker end the job after the supervisor itself died::

    {"containment": "cgroup-v1" | "cgroup-v2" | "subreaper",
     "cgroups": [DIR, ...], "procs": [[pid, starttime], ...]}

``starttime`` is field 22 of /proc/PID/stat (clock ticks since boot), so a pid reused by
an unrelated process is never signalled.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import signal
import time

__all__ = [
    "CONTAIN_FILE",
    "ENV_CONTAINMENT",
    "MODES",
    "Cgroup",
    "ProcInfo",
    "candidates",
    "descendants",
    "detect",
    "kill_recorded",
    "proc_table",
    "read_record",
    "rss_kb",
    "set_child_subreaper",
    "signal_procs",
    "write_record",
]

ENV_CONTAINMENT = "XCE_CONTAINMENT"
CONTAIN_FILE = "contain.json"
MODE_V2 = "cgroup-v2"
MODE_V1 = "cgroup-v1"
MODE_SUBREAPER = "subreaper"
MODES = (MODE_V2, MODE_V1, MODE_SUBREAPER)
#: valid values of XCE_CONTAINMENT
SETTINGS = ("auto", "subreaper")

_PR_SET_CHILD_SUBREAPER = 36
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# ---- processes, from /proc --------------------------------------------------------


class ProcInfo(tuple):
    """(pid, ppid, pgrp, state, starttime, rss_kb) of one process, from /proc/PID/stat."""

    __slots__ = ()

    pid = property(lambda self: self[0])
    ppid = property(lambda self: self[1])
    pgrp = property(lambda self: self[2])
    state = property(lambda self: self[3])
    starttime = property(lambda self: self[4])
    rss_kb = property(lambda self: self[5])


def _stat(pid: int | str) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()
    # after comm: state(0) ppid(1) pgrp(2) ... starttime is field 22 of stat (rest[19]), rss field 24 (rest[21])
    try:
        return ProcInfo((int(pid), int(rest[1]), int(rest[2]), rest[0].decode(), int(rest[19]),
                         int(rest[21]) * _PAGE_KB))
    except (IndexError, ValueError):
        return None


def starttime(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), None when there is no such process."""
    info = _stat(pid)
    return info.starttime if info is not None else None


def proc_table() -> dict[int, ProcInfo]:
    """Every process of the system, by pid (one pass over /proc)."""
    table: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = _stat(name)
            if info is not None:
                table[info.pid] = info
    return table


def descendants(roots: set[int] | list[int], table: dict[int, ProcInfo] | None = None) -> dict[int, ProcInfo]:
    """Every descendant of the processes `roots` (not the roots themselves), by pid, from a
    ppid scan of /proc (`table`, else a fresh one)."""
    table = proc_table() if table is None else table
    kids: dict[int, list[int]] = {}
    for info in table.values():
        kids.setdefault(info.ppid, []).append(info.pid)
    out: dict[int, ProcInfo] = {}
    todo = list(roots)
    while todo:
        for child in kids.get(todo.pop(), ()):
            if child not in out and child not in roots:
                out[child] = table[child]
                todo.append(child)
    return out


def rss_kb(procs) -> int:
    """Resident memory (kB) of the ProcInfo values `procs` together (JOB-2)."""
    return sum(p.rss_kb for p in procs)


def set_child_subreaper() -> bool:
    """Make this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux >= 3.4): its
    orphaned descendants are re-parented to it instead of init. False when refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def signal_procs(procs, sig: int) -> int:
    """Send `sig` to each (pid, starttime) of `procs` that is still that very process (same
    start time, checked through a pidfd so the pid cannot be reused in between); a zombie or
    a gone process is skipped. Returns how many were signalled. Never raises."""
    sent = 0
    for pid, start in procs:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            info = _stat(pid)
            if info is None or info.starttime != start or info.state == "Z":
                continue
            signal.pidfd_send_signal(fd, sig)
            sent += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return sent


# ---- the record in JOBDIR --------------------------------------------------------


def write_record(jobdir: str, containment: str, cgroups: list[str], procs) -> None:
    """Write JOBDIR/contain.json (tmp file and rename, mode 0600): the mechanism, the job's
    cgroup directories and its processes as (pid, starttime)."""
    path = os.path.join(jobdir, CONTAIN_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    data = json.dumps({"containment": containment, "cgroups": list(cgroups),
                       "procs": [[int(p), int(s)] for p, s in procs]}).encode()
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_record(jobdir: str) -> dict | None:
    """JOBDIR/contain.json as a dict, or None when absent or unreadable."""
    try:
        with open(os.path.join(jobdir, CONTAIN_FILE), "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---- cgroups ---------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mountpoint, root, fstype, super options) of each cgroup/cgroup2 mount, from mountinfo."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
            continue
        point = fields[4].replace("\\040", " ")
        out.append((point, fields[3], rfields[0], set(rfields[2].split(","))))
    return out


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller name, and "" for the unified hierarchy."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f.read().splitlines():
                _, ctrls, path = line.split(":", 2)
                for c in (ctrls.split(",") if ctrls else [""]):
                    out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _under(point: str, root: str, path: str) -> str:
    """The directory of cgroup `path` (as /proc/self/cgroup gives it) in a mount of `root`."""
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return os.path.join(point, path.lstrip("/")).rstrip("/")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _keyed(path: str, key: str) -> int:
    """The value of `key` in a flat keyed file (memory.events, memory.oom_control); 0 if absent."""
    try:
        for line in _read(path).splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _bases() -> dict[str, str]:
    """Where job cgroups may be made here: {"v2": DIR} when the unified hierarchy has the memory
    controller, {"memory": DIR, "freezer": DIR, "pids": DIR} for the v1 ones mounted; each DIR
    is this process's own cgroup in that hierarchy, and must be writable."""
    own = _own_cgroups()
    out: dict[str, str] = {}
    for point, root, fstype, opts in _mounts():
        if fstype == "cgroup2":
            base = _under(point, root, own.get("", "/"))
            try:
                if "memory" in _read(os.path.join(base, "cgroup.controllers")).split():
                    out.setdefault("v2", base)
            except OSError:
                pass
            continue
        for c in ("memory", "freezer", "pids"):
            if c in opts and c in own:
                out.setdefault(c, _under(point, root, own[c]))
    return {k: v for k, v in out.items() if os.access(v, os.W_OK)}


def candidates(setting: str | None = None) -> list[str]:
    """The mechanisms a job started now may get, strongest first, always ending with
    "subreaper" (the caller tries each cgroup one in turn and falls back).

    `setting` (default: $XCE_CONTAINMENT, else "auto"): "subreaper" never uses cgroups;
    "auto" offers cgroup v2 when the unified hierarchy has the memory controller, and the v1
    memory hierarchy when it is mounted, provided this process runs as root and may write
    there. Raises ValueError for another setting, naming the valid ones."""
    setting = (setting if setting is not None else os.environ.get(ENV_CONTAINMENT, "")) or "auto"
    if setting not in SETTINGS:
        raise ValueError(f"{ENV_CONTAINMENT}={setting!r} is not valid; valid: {', '.join(SETTINGS)}")
    if setting == "subreaper" or os.geteuid() != 0:
        return [MODE_SUBREAPER]
    bases = _bases()
    return [m for m, ok in ((MODE_V2, "v2" in bases), (MODE_V1, "memory" in bases), (MODE_SUBREAPER, True)) if ok]


def detect(setting: str | None = None) -> str:
    """The strongest mechanism of `candidates(setting)`: "cgroup-v2", "cgroup-v1" or
    "subreaper". Raises ValueError for a bad setting."""
    return candidates(setting)[0]


def _leaf_name(jobdir: str, job_id: int, index: int) -> tuple[str, str]:
    """(key, leaf) of the job's cgroups: key from <TopDir>/jobs, leaf job_ID_INDEX, or
    job_ID_INDEX_task_T for a task's own supervisor (JOBDIR/tasks/T), so that tasks of one
    job never share a cgroup with it or with each other."""
    path = os.path.abspath(jobdir)
    task = None
    if os.path.basename(os.path.dirname(path)) == "tasks":
        task = "".join(c for c in os.path.basename(path) if c.isalnum() or c in "-_")
        path = os.path.dirname(os.path.dirname(path))
    key = hashlib.sha256(os.path.dirname(os.path.dirname(path)).encode()).hexdigest()[:12]
    return key, f"job_{int(job_id)}_{int(index)}" + (f"_task_{task}" if task else "")


class Cgroup:
    """The cgroups of one job: `mode` ("cgroup-v2" or "cgroup-v1") and `dirs` (one per
    hierarchy: v2's, or v1's memory then freezer/pids). Made by `create`, joined by a process
    through `join(pid)`, ended by `kill()`, removed by `remove()`."""

    def __init__(self, mode: str, dirs: list[str]) -> None:
        self.mode = mode
        self.dirs = list(dirs)

    def __repr__(self) -> str:
        return f"Cgroup({self.mode!r}, {self.dirs!r})"

    @classmethod
    def create(cls, mode: str, jobdir: str, job_id: int, index: int, memory_limit_mb: int | None) -> Cgroup:
        """Make the job's cgroups for `mode` (from `detect`), with the memory limit (MB) when
        given. Raises OSError when a directory or a limit cannot be written (the caller falls
        back to the subreaper), after removing what it made."""
        bases = _bases()
        key, leaf = _leaf_name(jobdir, job_id, index)
        if mode == MODE_V2:
            hier = [("v2", bases["v2"])]
        elif mode == MODE_V1:
            hier = [("memory", bases["memory"])]
            if "freezer" in bases:
                hier.append(("freezer", bases["freezer"]))
            elif "pids" in bases:
                hier.append(("pids", bases["pids"]))
        else:
            raise ValueError(f"no cgroup for containment {mode!r}")
        cg = cls(mode, [])
        try:
            for name, base in hier:
                path = os.path.join(base, "xce", key, leaf)
                if name == "v2":
                    # each level down to the leaf must hand the memory controller on
                    for d in (base, os.path.join(base, "xce"), os.path.join(base, "xce", key)):
                        os.makedirs(d, exist_ok=True)
                        if "memory" not in _read(os.path.join(d, "cgroup.subtree_control")).split():
                            _write(os.path.join(d, "cgroup.subtree_control"), "+memory")
                for attempt in range(3):  # a parent removed by another job's cleanup meanwhile
                    try:
                        os.makedirs(path, exist_ok=True)
                        break
                    except FileNotFoundError:
                        if attempt == 2:
                            raise
                cg.dirs.append(path)
            if memory_limit_mb:
                limit = str(int(memory_limit_mb) * 1024 * 1024)
                if mode == MODE_V2:
                    _write(os.path.join(cg.dirs[0], "memory.max"), limit)
                    if os.path.exists(os.path.join(cg.dirs[0], "memory.swap.max")):
                        _write(os.path.join(cg.dirs[0], "memory.swap.max"), "0")
                else:
                    _write(os.path.join(cg.dirs[0], "memory.limit_in_bytes"), limit)
                    memsw = os.path.join(cg.dirs[0], "memory.memsw.limit_in_bytes")
                    if os.path.exists(memsw):  # no swapping round the limit
                        try:
                            _write(memsw, limit)
                        except OSError:
                            pass
        except BaseException:
            cg.remove(timeout=0.5)
            raise
        return cg

    def join(self, pid: int) -> None:
        """Move process `pid` into every cgroup of the job. Raises OSError."""
        for d in self.dirs:
            _write(os.path.join(d, "cgroup.procs"), str(pid))

    def pids(self) -> set[int]:
        """The pids in the job's cgroups now (any hierarchy)."""
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in _read(os.path.join(d, "cgroup.procs")).split())
            except (OSError, ValueError):
                pass
        return out

    def oom_kills(self) -> int:
        """How many processes of the job the kernel killed for its memory limit."""
        if not self.dirs:
            return 0
        if self.mode == MODE_V2:
            return _keyed(os.path.join(self.dirs[0], "memory.events"), "oom_kill")
        path = os.path.join(self.dirs[0], "memory.oom_control")
        try:
            text = _read(path)
        except OSError:
            return 0
        if "oom_kill " in text:
            return _keyed(path, "oom_kill")
        # kernels before 4.13 name no count: the limit was hit and usage reached it
        try:
            limit = int(_read(os.path.join(self.dirs[0], "memory.limit_in_bytes")))
            peak = int(_read(os.path.join(self.dirs[0], "memory.max_usage_in_bytes")))
            failed = int(_read(os.path.join(self.dirs[0], "memory.failcnt")))
        except (OSError, ValueError):
            return 0
        return 1 if failed and peak >= limit else 0

    def kill(self) -> None:
        """SIGKILL every process in the job's cgroups: v2's cgroup.kill, else freeze, kill each
        member, thaw (v1 freezer), else kill each member of cgroup.procs. Never raises."""
        if self.mode == MODE_V2 and os.path.exists(os.path.join(self.dirs[0], "cgroup.kill")):
            try:
                _write(os.path.join(self.dirs[0], "cgroup.kill"), "1")
                return
            except OSError:
                pass
        freezer = next((d for d in self.dirs if os.path.exists(os.path.join(d, "freezer.state"))), None)
        if freezer is not None:
            try:
                _write(os.path.join(freezer, "freezer.state"), "FROZEN")
            except OSError:
                freezer = None
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)  # members of the job's own cgroup: never a reused pid
            except OSError:
                pass
        if freezer is not None:
            try:
                _write(os.path.join(freezer, "freezer.state"), "THAWED")
            except OSError:
                pass

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the job's cgroup directories (and their xce/<key> parents when empty), trying
        again for up to `timeout` seconds while the kernel still counts dying members. True
        when all are gone. Never raises."""
        deadline = time.monotonic() + timeout
        ok = True
        for d in self.dirs:
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                        ok = False
                        break
                    self.kill()
                    time.sleep(0.01)
            for parent in (os.path.dirname(d), os.path.dirname(os.path.dirname(d))):
                try:
                    os.rmdir(parent)  # only when empty: another job's leaf keeps it
                except OSError:
                    break
        return ok


# ---- ending a job whose supervisor is gone -----------------------------------------


def kill_recorded(jobdir: str, timeout: float = 10.0) -> int:
    """End every process of the job in `jobdir` whose supervisor died (JOB-1): SIGKILL each
    process in its cgroups and each process of contain.json still alive with the same start
    time, and every descendant of those, again until none remains (or `timeout` seconds),
    then remove its cgroups. Returns how many processes were found alive and ended. Never raises."""
    rec = read_record(jobdir)
    if rec is None:
        return 0
    cg = Cgroup(str(rec.get("containment")), [str(d) for d in rec.get("cgroups") or []])
    listed = {(int(p), int(s)) for p, s in rec.get("procs") or [] if int(p) > 1}
    if not listed and not cg.dirs:
        return 0  # the job ended in order: its supervisor left nothing to end
    deadline = time.monotonic() + timeout
    ended: set[tuple[int, int]] = set()
    while True:
        table = proc_table()
        alive = {p for p, s in listed if p in table and table[p].starttime == s and table[p].state != "Z"}
        members = {p for p in cg.pids() if p in table and table[p].state != "Z"} if cg.dirs else set()
        roots = alive | members
        if not roots:
            break
        targets = {(p, table[p].starttime) for p in roots}
        targets |= {(p, i.starttime) for p, i in descendants(roots, table).items() if i.state != "Z"}
        listed |= targets  # a child seen now is killed too if its parent goes first
        ended |= targets
        if cg.dirs:
            cg.kill()
        signal_procs(targets, signal.SIGKILL)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    if cg.dirs:
        cg.remove(timeout=max(0.5, deadline - time.monotonic()))
    return len(ended)
