"""The worker's load sampler (RES-7): LSF's built-in load indices measured from /proc, the
utmp file and statvfs, with no library and no subprocess.

`LoadSampler.sample()` returns {index: value} (xced.model.load.LOAD_INDICES; units there).
It keeps the previous counters, so each call measures rates since the one before and the
averages move as LSF's LIM moves them (IBM Spectrum LSF 10.1 "Load indices",
https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=resources-load-indices):

- r1m, r15m: the kernel's 1- and 15-minute run queue averages (/proc/loadavg fields 1
  and 3). r15s: the kernel has none, so the sampler keeps an exponential average with a
  15 s time constant of the processes running now (/proc/stat `procs_running`, less the
  sampler itself), seeded with r1m. LSF notes that uptime's averages may also count
  processes in short waits (disk I/O); Linux's do, so r1m and r15m may read a little
  higher than a LIM's.
- ut: CPU time spent running user and system code (every /proc/stat `cpu` field but idle
  and iowait) over all CPU time, a fraction 0..1, averaged over 1 minute (exponentially).
- pg: pages swapped in plus out per second (/proc/vmstat pswpin + pswpout), averaged over
  1 minute: LSF's paging rate is the one that rises when RAM is short, not file I/O.
- io: KB/s read and written on the host's own disks (/proc/diskstats sectors of the
  devices in /sys/block that have a `device`, i.e. not loop, ram, zram or device-mapper
  layers), averaged over 1 minute.
- ls: users logged in, each counted once (USER_PROCESS records of the utmp file).
- it: minutes since the last input on any of their terminals (the newest access time of
  their /dev ttys); with nobody logged in, the minutes since boot.
- tmp, maxtmp: free and total MB of the file system holding /tmp (statvfs, free as an
  unprivileged user sees it). swp, maxswp: SwapFree and SwapTotal of /proc/meminfo, MB.
- ncpus: os.cpu_count(); maxmem: MemTotal, MB.

The first call has no earlier counters: rates are then the averages since boot. A source
that cannot be read (not Linux, a container without /proc/diskstats) leaves its indices out
of the report rather than guessing: a select on them is then false on the host, and says so.
Cost: a few small files read per call (well under a millisecond). A worker host measures at
its join and at each heartbeat (every 10 s, xced.api.peer), and sends the values with them;
the daemon's own worker samples every LOAD_SAMPLE_S and reports every LOAD_REPORT_S (LSF's
LIM updates most indices every 15 s).
"""

from __future__ import annotations

import math
import os
import struct
import time

from xced.model.load import check_load

__all__ = ["LOAD_REPORT_S", "LOAD_SAMPLE_S", "LoadSampler", "report_load", "safe_sample"]

#: seconds between two samples (r15s is averaged over these)
LOAD_SAMPLE_S = 5.0
#: seconds between two load reports to the controller (LSF's LIM: 15 s for most indices)
LOAD_REPORT_S = 15.0
_MB = 1024 * 1024
#: utmp record (Linux, glibc): type (int16 + pad), pid, line[32], id[4], user[32], host[256],
#: exit (2 x int16), session, tv (2 x int32), addr_v6 (4 x int32), 20 unused: 384 bytes
_UTMP = struct.Struct("hi32s4s32s256shhiii16s20s")
_USER_PROCESS = 7
_UTMP_PATHS = ("/run/utmp", "/var/run/utmp")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


class LoadSampler:
    """Measures the load indices of this host (see the module docstring). `clock`: a monotonic
    clock in seconds (injectable for tests); `proc`, `tmp`: where /proc and the temporary
    directory are. Not thread-safe; one per worker."""

    def __init__(self, *, clock=time.monotonic, proc: str = "/proc", tmp: str = "/tmp",
                 utmp: tuple[str, ...] = _UTMP_PATHS) -> None:
        self.clock = clock
        self.proc = proc
        self.tmp = tmp
        self.utmp = utmp
        self._t: float | None = None
        self._cpu: tuple[int, int] | None = None  # (busy, total) jiffies
        self._pages: int | None = None
        self._sectors: int | None = None
        self._avg: dict[str, float] = {}

    def _ema(self, name: str, value: float, dt: float | None, tau: float) -> float:
        """The exponential average of `name` over `tau` seconds after a new value `dt`
        seconds after the last one (the value itself the first time)."""
        old = self._avg.get(name)
        if old is None or dt is None:
            new = value
        else:
            a = math.exp(-dt / tau)
            new = old * a + value * (1 - a)
        self._avg[name] = new
        return new

    def sample(self) -> dict[str, float]:
        """One sample: {index: value}, each checked by xced.model.load.check_load."""
        now = self.clock()
        dt = None if self._t is None else max(now - self._t, 1e-3)
        out: dict[str, float] = {}
        uptime = None
        text = _read(f"{self.proc}/uptime")
        if text:
            try:
                uptime = float(text.split()[0])
            except (ValueError, IndexError):
                uptime = None
        since_boot = uptime if uptime and uptime > 0 else None

        text = _read(f"{self.proc}/loadavg")
        r1m = None
        if text:
            try:
                f = text.split()
                r1m, out["r15m"] = float(f[0]), float(f[2])
                out["r1m"] = r1m
            except (ValueError, IndexError):
                r1m = None
        stat = _read(f"{self.proc}/stat")
        if stat:
            running = None
            for line in stat.splitlines():
                if line.startswith("cpu "):
                    j = [int(x) for x in line.split()[1:]]
                    total = sum(j[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
                    busy = total - j[3] - (j[4] if len(j) > 4 else 0)
                    if self._cpu is None:
                        frac = busy / total if total > 0 else 0.0
                    else:
                        d_total = total - self._cpu[1]
                        frac = (busy - self._cpu[0]) / d_total if d_total > 0 else self._avg.get("ut", 0.0)
                    self._cpu = (busy, total)
                    out["ut"] = min(max(self._ema("ut", frac, dt, 60.0), 0.0), 1.0)
                elif line.startswith("procs_running "):
                    running = max(int(line.split()[1]) - 1, 0)  # less this sampler
            if running is not None:
                if "r15s" not in self._avg:  # seeded with the kernel's shortest average
                    self._avg["r15s"] = r1m if r1m is not None else float(running)
                    out["r15s"] = self._avg["r15s"]
                else:
                    out["r15s"] = self._ema("r15s", running, dt, 15.0)
        vm = _read(f"{self.proc}/vmstat")
        if vm:
            pages = 0
            for line in vm.splitlines():
                k, _, v = line.partition(" ")
                if k in ("pswpin", "pswpout"):
                    pages += int(v)
            rate = (pages - self._pages) / dt if self._pages is not None and dt else (
                pages / since_boot if since_boot else 0.0)
            self._pages = pages
            out["pg"] = self._ema("pg", max(rate, 0.0), dt, 60.0)
        sectors = self._disk_sectors()
        if sectors is not None:
            rate = (sectors - self._sectors) / dt if self._sectors is not None and dt else (
                sectors / since_boot if since_boot else 0.0)
            self._sectors = sectors
            out["io"] = self._ema("io", max(rate, 0.0) * 512 / 1024, dt, 60.0)
        users, last_input = self._logins()
        if users is not None:
            out["ls"] = float(users)
            idle_s = time.time() - last_input if last_input is not None else since_boot
            if idle_s is not None:
                out["it"] = max(idle_s, 0.0) / 60.0
        mem = _read(f"{self.proc}/meminfo")
        if mem:
            kb: dict[str, int] = {}
            for line in mem.splitlines():
                k, _, v = line.partition(":")
                if k in ("MemTotal", "SwapTotal", "SwapFree"):
                    kb[k] = int(v.split()[0])
            if "SwapFree" in kb:
                out["swp"] = kb["SwapFree"] / 1024
            if "SwapTotal" in kb:
                out["maxswp"] = kb["SwapTotal"] / 1024
            if "MemTotal" in kb:
                out["maxmem"] = kb["MemTotal"] / 1024
        try:
            st = os.statvfs(self.tmp)
            out["tmp"] = st.f_bavail * st.f_frsize / _MB
            out["maxtmp"] = st.f_blocks * st.f_frsize / _MB
        except OSError:
            pass
        out["ncpus"] = float(os.cpu_count() or 1)
        self._t = now
        return check_load({k: round(v, 4) for k, v in out.items()})

    def _disk_sectors(self) -> int | None:
        """Sectors read plus written on the host's own disks, or None when unknown."""
        text = _read(f"{self.proc}/diskstats")
        if text is None:
            return None
        total = 0
        for line in text.splitlines():
            f = line.split()
            if len(f) < 10:
                continue
            name = f[2]
            if not os.path.exists(f"/sys/block/{name.replace('/', '!')}/device"):
                continue  # a partition (counted in its disk), or a loop/ram/zram/dm layer
            total += int(f[5]) + int(f[9])
        return total

    def _logins(self) -> tuple[int | None, float | None]:
        """(users logged in, each once; epoch time of the newest input on their terminals, or
        None), from the utmp file; (0, None) when there is none (nobody has logged in)."""
        for path in self.utmp:
            try:
                with open(path, "rb") as f:
                    data = f.read(_UTMP.size * 100_000)
            except FileNotFoundError:
                continue
            except OSError:
                return None, None
            users: set[bytes] = set()
            newest = None
            for off in range(0, len(data) - _UTMP.size + 1, _UTMP.size):
                rec = _UTMP.unpack_from(data, off)
                if rec[0] != _USER_PROCESS:
                    continue
                users.add(rec[4].rstrip(b"\0"))
                line = rec[2].rstrip(b"\0").decode("ascii", "replace")
                if line and "/" not in line.replace("pts/", "", 1) and ".." not in line:
                    try:
                        t = os.stat(f"/dev/{line}").st_atime
                    except OSError:
                        continue
                    newest = t if newest is None else max(newest, t)
            return len(users), newest
        return 0, None


def safe_sample(sampler: LoadSampler) -> dict[str, float] | None:
    """`sampler.sample()`, or None (logged) when measuring fails: a worker never stops for
    its load report."""
    try:
        return sampler.sample()
    except Exception:  # noqa: BLE001 - /proc text this sampler cannot read: no report, the worker runs on
        import logging

        logging.getLogger("xced.worker").exception("measuring the load indices failed; no load report")
        return None


async def report_load(sampler: LoadSampler, send, *, sample_s: float = LOAD_SAMPLE_S,
                      report_s: float = LOAD_REPORT_S) -> None:
    """Sample every `sample_s` seconds and call `send(values)` every `report_s` (RES-7), until
    cancelled: the daemon's own worker, `send` being the controller's `host_load` (a worker
    host sends its values with its heartbeats instead)."""
    import asyncio

    since = 0.0
    while True:
        await asyncio.sleep(sample_s)
        values = safe_sample(sampler)
        since += sample_s
        if values is not None and since >= report_s - 1e-9:
            since = 0.0
            send(values)
