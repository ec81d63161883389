"""Recordings of live scheduler sessions and their replay (SIM-2, D-4).

A recording is a JSON Lines file. Its first line is a header:
`{"kind": "header", "version": 1, "cluster": NAME, "config_hash": SHA256, "config": {...}}`
(the ClusterConfig in force, profiles included). Every later line is one session:
`{"kind": "session", "seq": N, "now": EPOCH_S, "config_hash": SHA256, "snapshot": {...},
"decisions": {...}}`, where the snapshot holds every input of `schedule()` (hosts, queues,
pending elements with their effective resreq text, running elements, array counts) and
the decisions hold its output (dispatches with hosts and reservations, backfill
reservations, and the pend reasons pushed to the controller).

`verify(path)` replays each session through today's `schedule()` and returns every
decision that differs: a dispatch made or not, another allocation, another reservation,
or another pushed pend reason. A recorded reason is compared with the reason the replay
gives that element (the replay pushes every reason, the live session only those that
changed, SCHED-3).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from xced.model.jobs import PendReason
from xced.resreq import parse, render
from xced.scheduler.session import SessionResult, schedule
from xced.model.load import check_load
from xced.scheduler.snapshot import Clock, HostSupply, JobSnap, QueueSnap, RunSnap, Snapshot

__all__ = ["RecordingError", "Difference", "Recorder", "header_line", "session_line", "read_recording", "verify",
           "snapshot_from_json", "snapshot_to_json"]

VERSION = 1
#: what `xceadmin sim record --name` may be (a file name under <TopDir>/recordings)
RECORDING_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


class RecordingError(ValueError):
    """A recording that cannot be read: FILE:LINE and what is wrong."""


@dataclass(slots=True)
class Difference:
    """One decision that differs: session `seq` (line `line` of the file), the element
    ("12" or "12[3]", or "-" for a reservation list), what was recorded and what the
    replay decided."""

    seq: int
    line: int
    element: str
    what: str
    recorded: Any
    replayed: Any

    def __str__(self) -> str:
        return (f"session {self.seq} (line {self.line}): {self.element}: {self.what}: "
                f"recorded {self.recorded!r}, replay {self.replayed!r}")


def _ref(job_id: int, index: int) -> str:
    return str(job_id) if index == 0 else f"{job_id}[{index}]"


def snapshot_to_json(s: Snapshot) -> dict:
    """Every input of `schedule()` as plain JSON (resreqs as canonical text). With projects
    (PRJ-6, PRJ-7) a pending row ends with its project and user, and "projects" (the
    projects config) and "usage" ([project, user, {resource: amount}] per running element)
    come along; without, they are left out, as recordings made before projects have them.
    Exclusive jobs (LSF bsub -x, docs/lsf-behaviour.md section 6): a host row with jobs running
    ends with its load indices ({} for none) and [njobs, exclusive], with a third item when a
    job was dispatched to it (its last dispatch, issue 19: ties go to the host dispatched to
    least recently); the row of an exclusive
    pending job ends with project, user (null for none) and true. Other rows are as before."""
    out = {
        "hosts": [[h.name, h.slots, h.slots_free, h.mem_mb, h.mem_free_mb, h.status, h.resources,
                   h.resources_free, h.attributes, sorted(h.tags)]
                  + ([h.load, [h.njobs, h.exclusive] + ([h.last_dispatch] if h.last_dispatch else [])]
                     if h.njobs or h.exclusive or h.last_dispatch else [h.load] if h.load else [])
                  for h in s.hosts],
        "queues": [[q.name, q.priority, q.position, q.host_limit, q.backfill] for q in s.queues],
        "pending": [[j.job_id, j.index, j.queue, j.submit_time, j.ntasks_min, j.ntasks_max, render(j.resreq),
                     j.array_limit, j.held, j.profile_hash, j.run_limit_s]
                    + ([j.project, j.user, True] if j.exclusive else
                       [j.project, j.user] if j.project is not None or j.user is not None else []) for j in s.pending],
        "running": [[r.job_id, r.index, r.end_estimate, r.reserve] for r in s.running],
        "array_running": [[k, v] for k, v in s.array_running.items()],
        "clock": [s.clock.wall, s.clock.utc_offset_s],
    }
    if s.projects is not None:
        out["projects"] = s.projects.model_dump(mode="json")
        out["usage"] = [[p, u, dict(used)] for p, u, used in s.usage]
    return out


#: recordings made before snapshots carried their clock were live sessions whose times read in
#: the local time zone of the machine: replayed the same way
_OLD_RECORDING_CLOCK = Clock(True, __import__("time").localtime().tm_gmtoff)


def _host_jobs(extra: list) -> tuple[int, bool, float]:
    """(njobs, exclusive, last dispatch) of a host row's last item (snapshot_to_json);
    (0, False, 0.0) without one; a pair (recorded before the last dispatch was) has 0.0.
    Raises ValueError for another shape."""
    if not extra:
        return 0, False, 0.0
    pair = extra[0]
    if not (isinstance(pair, list) and len(pair) in (2, 3) and isinstance(pair[0], int) and pair[0] >= 0
            and isinstance(pair[1], bool)
            and (len(pair) == 2 or isinstance(pair[2], (int, float)) and not isinstance(pair[2], bool))):
        raise ValueError(f"a host row ends with {pair!r}; expected [njobs, exclusive] or [njobs, exclusive, "
                         f"last dispatch], e.g. [1, true] or [1, false, 1796428716.5]")
    return pair[0], pair[1], float(pair[2]) if len(pair) == 3 else 0.0


def snapshot_from_json(d: dict) -> Snapshot:
    """The Snapshot of `snapshot_to_json`. Raises KeyError/TypeError/ValueError on a bad one."""
    parsed: dict[str, Any] = {}

    def rr(text: str):
        got = parsed.get(text)
        if got is None:
            got = parsed[text] = parse(text)
        return got

    def job(row: list) -> JobSnap:
        jid, idx, q, st, nmin, nmax, text, al, held, ph, rl, *who = row
        project, user = who[:2] if who else (None, None)  # rows recorded before projects have neither
        return JobSnap(jid, idx, q, st, nmin, nmax, rr(text), al, bool(held), ph, rl, project=project, user=user,
                       exclusive=len(who) > 2 and who[2] is True)

    projects = None
    if d.get("projects") is not None:
        from xced.model.project import ProjectsConfig

        projects = ProjectsConfig.model_validate(d["projects"])  # a ValidationError is a ValueError
    # a host row ends with its load indices when it had any (RES-7; older recordings have none)
    # and then [njobs, exclusive] when jobs ran there (bsub -x; older recordings have neither)
    hosts = [HostSupply(n, sl, sf, m, mf, dict(r), dict(rf), dict(a), frozenset(t), st,
                        check_load(load[0]) if load else {}, *_host_jobs(load[1:]))
             for n, sl, sf, m, mf, st, r, rf, a, t, *load in d["hosts"]]
    for h in hosts:
        if not (isinstance(h.slots, int) and isinstance(h.slots_free, int) and 0 <= h.slots_free <= h.slots
                and isinstance(h.mem_mb, int) and h.mem_mb >= 0):
            raise ValueError(f"host {h.name!r}: slots {h.slots!r}, free {h.slots_free!r}, memory {h.mem_mb!r}")
    return Snapshot(
        hosts,
        [QueueSnap(n, p, pos, hl, bool(bf)) for n, p, pos, hl, bf in d["queues"]],
        [job(row) for row in d["pending"]],
        {int(k): v for k, v in d["array_running"]},
        [RunSnap(jid, idx, end, {h: dict(v) for h, v in res.items()}) for jid, idx, end, res in d["running"]],
        Clock(bool(d["clock"][0]), int(d["clock"][1])) if "clock" in d else _OLD_RECORDING_CLOCK,
        projects,
        [(p, u, {k: float(v) for k, v in used.items()}) for p, u, used in d.get("usage", [])],
    )


def _reason_json(pr: PendReason) -> dict:
    out = {"main": pr.main, "hint": pr.hint,
           "hosts": [[h.host, h.resource, h.free, h.needed, h.message] for h in pr.hosts]}
    if pr.caps:  # a job held back by its project's caps (PRJ-6, PRJ-7); absent otherwise, as before
        out["caps"] = list(pr.caps)
    return out


def decisions_to_json(r: SessionResult) -> dict:
    """A session's output: dispatches, reservations and the pushed pend reasons."""
    return {
        "dispatches": [[d.job_id, d.index, [list(a) for a in d.alloc], d.reserve, d.backfill] for d in r.dispatches],
        "reservations": [[x.job, x.queue, x.start] for x in r.reservations],
        "reasons": [[jid, idx, _reason_json(pr)] for (jid, idx), pr in r.pend_reasons.items()],
    }


def header_line(config) -> str:
    """The first line of a recording: the ClusterConfig in force (profiles included)."""
    return json.dumps({"kind": "header", "version": VERSION, "cluster": config.settings.cluster_name,
                       "config_hash": config.content_hash(), "config": config.model_dump(mode="json")},
                      separators=(",", ":"))


def session_line(seq: int, now: float, config_hash: str, snapshot: Snapshot, result: SessionResult) -> str:
    """One session of a recording (see the module docstring)."""
    return json.dumps({"kind": "session", "seq": seq, "now": now, "config_hash": config_hash,
                       "snapshot": snapshot_to_json(snapshot), "decisions": decisions_to_json(result)},
                      separators=(",", ":"))


def read_recording(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, line dict) for each header and session line of the recording at
    `path`, in order. Raises RecordingError for a missing file, a line that is not JSON
    or not UTF-8, or no header."""
    p = Path(path)
    try:
        f = open(p, encoding="utf-8")
    except OSError as e:
        raise RecordingError(f"{p}: cannot read it: {e.strerror}") from None
    with f:
        header = False
        lines = enumerate(f, 1)
        while True:
            try:
                lineno, line = next(lines)
            except StopIteration:
                break
            except UnicodeDecodeError:
                raise RecordingError(f"{p}: not text (not UTF-8); a recording is JSON Lines as written by "
                                     f"`xceadmin sim record`") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise RecordingError(f"{p}:{lineno}: not a JSON line ({e.msg}); a recording is JSON Lines as "
                                     f"written by `xceadmin sim record`") from None
            kind = obj.get("kind") if isinstance(obj, dict) else None
            if kind == "header":
                if obj.get("version") != VERSION:
                    raise RecordingError(f"{p}:{lineno}: recording version {obj.get('version')!r}; this xceadmin "
                                         f"reads version {VERSION}")
                header = True
                yield lineno, obj
            elif kind == "session":
                if not header:
                    raise RecordingError(f"{p}:{lineno}: a session before the header line")
                yield lineno, obj
            else:
                raise RecordingError(f"{p}:{lineno}: kind {kind!r}; a recording has 'header' and 'session' lines")
        if not header:
            raise RecordingError(f"{p}: empty; no header line (is it a recording of `xceadmin sim record`?)")


def verify(path: str | Path) -> tuple[int, list[Difference]]:
    """Replay every session of the recording at `path`; (sessions replayed, differences).
    Raises RecordingError for an unreadable recording or session."""
    from pydantic import ValidationError

    from xced.model.config import ClusterConfig

    diffs: list[Difference] = []
    n = 0
    in_force: str | None = None  # the config hash of the last header
    last_seq = 0
    for lineno, obj in read_recording(path):
        if obj["kind"] == "header":
            try:
                cfg = ClusterConfig.model_validate(obj.get("config"))
            except ValidationError as e:
                raise RecordingError(f"{path}:{lineno}: the header's config is not a valid cluster config "
                                     f"({e.error_count()} problem(s), first: {e.errors()[0]['msg']})") from None
            in_force = cfg.content_hash()
            if obj.get("config_hash") != in_force:
                diffs.append(Difference(0, lineno, "-", "header config hash", obj.get("config_hash"), in_force))
                in_force = obj.get("config_hash")  # the sessions are held to what the header says
            continue
        n += 1
        seq = obj.get("seq", n)
        if seq != last_seq + 1:  # sessions are numbered 1, 2, 3, ... by the recorder
            diffs.append(Difference(seq, lineno, "-", "session number (a session missing, repeated or moved)",
                                    last_seq + 1, seq))
        last_seq = seq if isinstance(seq, int) else last_seq + 1
        if obj.get("config_hash") != in_force:
            diffs.append(Difference(seq, lineno, "-", "config hash (not the config of the header before it)",
                                    obj.get("config_hash"), in_force))
        try:
            snap = snapshot_from_json(obj["snapshot"])
            now = float(obj["now"])
            rec = obj["decisions"]
            if not math.isfinite(now):
                raise ValueError("now")
            got = decisions_to_json(schedule(snap, now))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            what = f"missing {e}" if isinstance(e, KeyError) else "a field has the wrong shape or type"
            raise RecordingError(f"{path}:{lineno}: session {seq} is malformed ({what}); a session line holds "
                                 f"seq, now, config_hash, snapshot and decisions as `xceadmin sim record` "
                                 f"writes them") from None
        recd = {(d[0], d[1]): d for d in rec.get("dispatches", [])}
        repd = {(d[0], d[1]): d for d in got["dispatches"]}
        for key in sorted(set(recd) | set(repd)):
            a, b = recd.get(key), repd.get(key)
            el = _ref(*key)
            if a is None or b is None:
                diffs.append(Difference(seq, lineno, el, "dispatch", "dispatched" if a else "not dispatched",
                                        "dispatched" if b else "not dispatched"))
            elif a[2:4] != b[2:4]:
                diffs.append(Difference(seq, lineno, el, "allocation", a[2:4], b[2:4]))
            elif a[4:] != b[4:]:
                diffs.append(Difference(seq, lineno, el, "backfill (started ahead of a reserved head)",
                                        bool(a[4]) if len(a) > 4 else None, bool(b[4])))
        if rec.get("reservations", []) != got["reservations"]:
            diffs.append(Difference(seq, lineno, "-", "reservations", rec.get("reservations"), got["reservations"]))
        replay_reasons = {(jid, idx): r for jid, idx, r in got["reasons"]}
        for jid, idx, r in rec.get("reasons", []):
            mine = replay_reasons.get((jid, idx))
            if mine != r:
                if isinstance(r, dict) and mine is not None and r.get("main") == mine.get("main"):
                    part = "hint" if r.get("hint") != mine.get("hint") else "hosts"
                    diffs.append(Difference(seq, lineno, _ref(jid, idx), f"pend reason ({part})", r.get(part),
                                            mine.get(part)))
                else:
                    diffs.append(Difference(seq, lineno, _ref(jid, idx), "pend reason",
                                            r.get("main") if isinstance(r, dict) else r,
                                            mine.get("main") if mine else None))
    return n, diffs



class Recorder:
    """An open recording of the live scheduler's sessions (SIM-2): `<TopDir>/recordings/NAME.jsonl`,
    a new file of mode 0600, given to the asking admin (`owner`, a (uid, gid)) when the daemon
    runs as root. The daemon writes only under its TopDir, never where a caller points it.
    Its header is the config in force; `session()` adds each session, `config()` a config
    applied live, `close()` ends it. Raises InvalidRequest (a bad name, the file exists, the
    directory cannot be written)."""

    def __init__(self, topdir: Path, name: str, config, owner: tuple[int, int | None] | None = None) -> None:
        from xced.api.errors import InvalidRequest

        if not RECORDING_NAME.fullmatch(name):
            raise InvalidRequest(f"recording name {name!r}: use letters, digits, '.', '_' and '-' (at most 100, "
                                 f"starting with a letter, digit or '_'); it is written to "
                                 f"{topdir}/recordings/NAME.jsonl (NAME.jsonl names the same file)", field="name")
        rdir = topdir / "recordings"
        if rdir.exists() and not rdir.is_dir():
            raise InvalidRequest(f"{rdir} is not a directory; move it away so recordings can be written there",
                                 field="name")
        path = str(rdir / (name if name.endswith(".jsonl") else name + ".jsonl"))
        try:
            rdir.mkdir(mode=0o755, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise InvalidRequest(f"{path} exists already; a recording goes to a new file", field="name") from None
        except OSError as e:
            raise InvalidRequest(f"{path}: the daemon cannot create it: {e.strerror}", field="name") from None
        if owner is not None and os.geteuid() == 0:
            try:
                os.fchown(fd, owner[0], owner[1] if owner[1] is not None else -1)
            except OSError:
                pass
        self.file = os.fdopen(fd, "w", encoding="utf-8")
        self.path = path
        self.sessions = 0
        self.file.write(header_line(config) + "\n")
        self.file.flush()

    def session(self, now: float, config_hash: str, snap: Snapshot, result: SessionResult) -> bool:
        """Write one session; False (logged) when the file cannot be written: recording stops."""
        self.sessions += 1
        try:
            self.file.write(session_line(self.sessions, now, config_hash, snap, result) + "\n")
            self.file.flush()
        except OSError as e:
            logging.getLogger("xced.sim").error("recording to %s stopped: %s", self.path, e)
            self.file.close()
            return False
        return True

    def config(self, config) -> None:
        """A config applied live: its header, so that later sessions replay with it."""
        self.file.write(header_line(config) + "\n")

    def close(self) -> dict:
        """End the recording: {"path", "sessions"}."""
        self.file.close()
        return {"path": self.path, "sessions": self.sessions}
