"""`<TopDir>/lsf.conf`: XCE's own semantics in LSF's words, for the tools that read LSF's
settings through `LSF_ENVDIR` (issue 18 part 5; CLI-8, JOB-2, JOB-13, RES-2).

Pipeline tools built for LSF read `$LSF_ENVDIR/lsf.conf` (default `/etc/lsf.conf`) to learn
how the cluster reads the numbers they pass to `bsub`: dask-jobqueue reads
`LSF_UNIT_FOR_LIMITS` to write `-M` and `rusage[mem=...]` in the cluster's unit; Nextflow
reads it too, and `LSB_JOB_MEMLIMIT` and `RESOURCE_RESERVE_PER_TASK` to decide whether a
memory value is the job's or each task's. With `export LSF_ENVDIR=<TopDir>` they see what
XCE does:

- `LSF_UNIT_FOR_LIMITS=MB`: a memory value without a unit is MB (`-M 4096`, `rusage[mem=
  4096]`; DESIGN "Units"). IBM bsub -M: "By default, the limit is specified in KB. Use the
  LSF_UNIT_FOR_LIMITS parameter in the lsf.conf file to specify a larger unit".
- `LSB_JOB_MEMLIMIT=Y`: the memory limit (`-M`, a profile's or queue's) is the job's, over
  the resident memory of all its processes together, enforced by XCE's supervisor (JOB-2,
  xced.merge): IBM lsf.conf LSB_JOB_MEMLIMIT, "The per-job limit is enforced by LSF when the
  sum of the memory allocated to all processes of the job exceeds the memory limit", y
  meaning that one and not the OS's per-process limit.
- `RESOURCE_RESERVE_PER_TASK=Y`: an rusage term reserves per task unless it says `/host` or
  `/job` (RES-2, docs/lsf-behaviour.md section 6; LSF's own default is per host).
- `LSB_STDOUT_DIRECT=Y`: `-o`/`-e` files are written as the job runs (JOB-1); IBM lsf.conf
  LSB_STDOUT_DIRECT: "redirects standard output or standard error from the job directly to
  a file as the job runs".

XCE itself never reads this file: it is written from the values above by `xced` at every
start and by `xceadmin build`, atomically (a reader never sees half of it), mode 0644 so
every user's tools can read it. The comment lines never start with a parameter's name, so
that readers that match lines by their start (dask-jobqueue) find only the settings.

Stdlib only: xceadmin imports it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LSF_CONF", "LSF_CONF_MODE", "SETTINGS", "lsf_conf_text", "write_lsf_conf"]

#: the file's name in the TopDir (LSF_ENVDIR/lsf.conf)
LSF_CONF = "lsf.conf"
#: readable by every user, written only by the daemon's user
LSF_CONF_MODE = 0o644
#: the parameters and their values, in the order written (see the module docstring)
SETTINGS: tuple[tuple[str, str], ...] = (
    ("LSF_UNIT_FOR_LIMITS", "MB"),
    ("LSB_JOB_MEMLIMIT", "Y"),
    ("RESOURCE_RESERVE_PER_TASK", "Y"),
    ("LSB_STDOUT_DIRECT", "Y"),
)


def lsf_conf_text() -> str:
    """The file's text: a comment saying what it is, then one `NAME=VALUE` line per setting."""
    head = ("# Written by XCE (xced at start, xceadmin build); edits are overwritten.\n"
            "# What XCE does, in LSF's words, for tools that read lsf.conf through LSF_ENVDIR\n"
            "# (dask-jobqueue, Nextflow): export LSF_ENVDIR=<this TopDir>. XCE does not read it.\n")
    return head + "".join(f"{k}={v}\n" for k, v in SETTINGS)


def write_lsf_conf(top: Path) -> Path:
    """Write `<top>/lsf.conf` (lsf_conf_text) atomically with mode 0644, unless it already
    holds exactly that text with that mode. Returns its path. Raises OSError (a TopDir the
    caller cannot write)."""
    import os
    import stat

    from xced.config.atomic import atomic_write

    path = Path(top) / LSF_CONF
    text = lsf_conf_text().encode()
    try:
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == LSF_CONF_MODE and path.read_bytes() == text:
            return path
    except OSError:
        pass
    atomic_write(path, text, LSF_CONF_MODE)
    return path
