"""The job-config merge (SPEC MERGE-1..MERGE-4, PROF-3..PROF-7, PROF-9, PROF-10).

One pure function, `merge_job(job, profile, queue, project=None)`, turns what a
job asked (`JobValues`, kept as submitted) plus its application profile and its
queue's policy into the `Effective` values the scheduler places with and the
worker runs. No I/O. The controller calls it at submit (and for the dry run),
and again for every pending job when the config changes or the job is
requeued or released (CFG-3), so a pending job runs with what the config in
force says; its result is stored on the job and is what dispatch uses.

Rules, by SPEC id:

- PROF-3: every profile value binds; a job may add, never change or remove.
- PROF-4: select ANDed (profile first); rusage is the one per-resource default:
  for an entry marked `default: true` the job's term wins whole, in either
  direction; units must match; no `per` is inherited. An entry without the flag
  binds like every profile value (PROF-3): a differing job term is refused; a profile span/same/order binds (a conflicting job value is a
  `MergeError` naming both; an equal one is redundant, a warning).
- PROF-5: compound/alternative job requests get the profile select ANDed into
  every part; refused when the profile has rusage entries or span/same/order.
- PROF-6/PROF-7: declared params with job overrides, exported as
  `XCE_APP_PARAM_<NAME>`; annotations as `XCE_APP_ANN_<NAME>` (`export_name`).
- PROF-9: a service profile is refused for a batch job.
- PROF-10: the profile env and the job env are kept apart.
- MERGE-2: queue ceilings never satisfiable -> `MergeError` (ntasks_min over
  max_tasks, run limit over max_run_limit_s, memory over max_memory_mb); a job
  without any run limit gets the queue's max_run_limit_s, and one without any memory
  limit (its own -M, or its profile's) the queue's max_memory_mb (JOB-2; LSF's queue
  MEMLIMIT is likewise the default limit of the queue's jobs).
  An rusage[mem] reservation whose job total (per task x tasks, per host x hosts, per
  job once) is over the job's memory limit is a `MergeError` naming both
  (`_check_rusage_memory`); a job's own -M over the largest host is refused at submit
  (`memory_over_hosts`, which needs the hosts, so the controller calls it).
- MERGE-3: rusage terms of value 0 are dropped.
- MERGE-4: exdata rewritten (`env`, `limits`, `app_params`), `meta` kept as the
  very same object; unknown top-level keys are left out with a warning.

Origins: every effective value carries "job", "profile", "profile+job",
"queue" or "default" in `Effective.origins` under keys "select",
"rusage.<name>", "span", "same", "order", "ntasks", "run_limit",
"memory_limit", "param.<NAME>".

`project` is accepted now (MERGE-1) and not used until projects exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from xced.model.config import QueueConfig
from xced.model.profile import (
    ANNOTATION_ENV_PREFIX,
    MAX_PARAM_BYTES,
    PARAM_ENV_PREFIX,
    Profile,
    RusageEntry,
    export_name,
)
from xced.resreq import (
    BoolOp,
    Expr,
    OrderKey,
    Part,
    ResReq,
    RusageGroup,
    RusageTerm,
    Span,
    Reserved,
    parse_select,
    reserve_ways,
    shared,
    to_json,
)

__all__ = ["EXDATA_KEYS", "Effective", "JobValues", "MergeError", "memory_over_hosts", "merge_job"]

#: The known top-level keys of exdata (MERGE-4).
EXDATA_KEYS = ("env", "limits", "app_params", "meta")


class MergeError(ValueError):
    """A job that cannot be merged with its profile/queue; the message names both
    values (the job's and the profile's or queue's) and what would be valid."""


@dataclass(frozen=True, slots=True)
class JobValues:
    """What the job itself asked, kept as submitted (MERGE-1)."""

    resreq: ResReq
    ntasks_min: int | None
    ntasks_max: int | None
    run_limit_s: int | None
    memory_limit_mb: int | None
    env: dict[str, str]
    app_params: dict[str, str]
    exdata: dict | str | None = None


@dataclass(slots=True)
class Effective:
    """The merged values (MERGE-1), with origins and warnings."""

    resreq: ResReq
    ntasks_min: int
    ntasks_max: int
    run_limit_s: int | None
    memory_limit_mb: int | None
    job_env: dict[str, str]
    profile_env: dict[str, str]
    app_params: dict[str, str]
    export_env: dict[str, str]
    origins: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    exdata: dict = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `--dry-run --json` form."""
        return {
            "resreq": to_json(self.resreq),
            "ntasks_min": self.ntasks_min,
            "ntasks_max": self.ntasks_max,
            "run_limit_s": self.run_limit_s,
            "memory_limit_mb": self.memory_limit_mb,
            "job_env": dict(self.job_env),
            "profile_env": dict(self.profile_env),
            "app_params": dict(self.app_params),
            "export_env": dict(self.export_env),
            "origins": dict(self.origins),
            "warnings": list(self.warnings),
            "exdata": self.exdata,
        }


# --------------------------------------------------------------------------- helpers


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


def _fmt(v: float, unit: str | None) -> str:
    n = _num(v)
    return f"{n} {unit}" if unit else str(n)


def _span_text(s: Span) -> str:
    for key in ("ptile", "hosts", "block"):
        value = getattr(s, key)
        if value is not None:
            return f"span[{key}={value}]"
    return "span[]"  # pragma: no cover - a Span always has one field


def _order_text(keys: tuple[OrderKey, ...]) -> str:
    return "order[" + ":".join(("-" if k.desc else "") + k.name for k in keys) + "]"


def _origin(profile_has: bool, job_has: bool) -> str:
    if profile_has and job_has:
        return "profile+job"
    if profile_has:
        return "profile"
    if job_has:
        return "job"
    return "default"


def _and(profile_sel: Expr | None, job_sel: Expr | None) -> Expr | None:
    if profile_sel is None:
        return job_sel
    if job_sel is None:
        return profile_sel
    return BoolOp("&&", (profile_sel, job_sel))


def _select_into_parts(req: ResReq, sel: Expr) -> ResReq:
    """PROF-5: AND the profile select into every simple leaf of a compound or
    alternative request."""
    if req.kind == "simple":
        return replace(req, select=_and(sel, req.select))
    return replace(req, parts=tuple(Part(p.count, _select_into_parts(p.resreq, sel)) for p in req.parts))


def _profile_term(e: RusageEntry) -> RusageTerm:
    # the profile term keeps its own `per` (PROF-4: no modifier is inherited)
    unit = "MB" if e.unit == "MB" else None
    return RusageTerm(name=e.name, value=_num(e.value), unit=unit, per=e.per)


def _merge_rusage(
    job_alts: tuple[tuple[RusageGroup, ...], ...],
    profile: Profile | None,
    origins: dict[str, str],
    warnings: list[str],
) -> tuple[tuple[RusageGroup, ...], ...]:
    """PROF-4 / MERGE-3: entries marked `default: true` are per-resource defaults
    applied into every `||` alternative of the job, the job's term winning whole
    (0 drops it); entries without the flag bind (PROF-3): always reserved, and a
    job term that differs is a MergeError (an equal one is a redundant warning)."""
    entries = {e.name: e for e in profile.rusage} if profile is not None else {}
    pname = profile.name if profile is not None else ""
    alts = job_alts or ((),)
    out: list[tuple[RusageGroup, ...]] = []
    for alt in alts:
        groups: list[RusageGroup] = []
        job_names: set[str] = set()
        for g in alt:
            kept: list[RusageTerm] = []
            for t in g.terms:
                job_names.add(t.name)
                e = entries.get(t.name)
                if e is not None and not e.default:
                    # PROF-3: an entry not marked `default: true` binds like every profile value
                    mine = _profile_term(e)
                    if (t.value, t.unit, t.per or "task") != (mine.value, mine.unit, mine.per or "task"):
                        raise MergeError(
                            f"rusage {t.name}: profile {pname} fixes {_fmt(e.value, e.unit)} per {e.per} "
                            f"and a job may not change or remove it (PROF-3); the job asked "
                            f"{_fmt(t.value, t.unit)} per {t.per or 'task'}. Drop the job's {t.name} term, "
                            f"or an admin marks the entry `default: true` to make it a per-resource default")
                    w = f"rusage {t.name}: the job's term repeats the profile's {_fmt(e.value, e.unit)}"
                    if w not in warnings:
                        warnings.append(w)
                    continue  # the profile's own term is added below
                if e is not None:
                    punit = "MB" if e.unit == "MB" else e.unit
                    if t.unit != punit:
                        raise MergeError(
                            f"rusage {t.name}: the job's {_fmt(t.value, t.unit)} is "
                            f"{'in ' + t.unit if t.unit else 'without a unit'} but profile "
                            f"{pname} gives {_fmt(e.value, e.unit)} "
                            f"{'in ' + e.unit if e.unit else 'without a unit'}; "
                            f"write the job's value {'in ' + e.unit if e.unit else 'without a unit'}"
                        )
                    if 0 < t.value < e.value:
                        w = (f"rusage {t.name}: the job's {_fmt(t.value, t.unit)} is below "
                             f"the profile's default {_fmt(e.value, e.unit)}")
                        if w not in warnings:
                            warnings.append(w)
                if t.value == 0:
                    continue  # MERGE-3: "none"
                kept.append(t)
                origins[f"rusage.{t.name}"] = "job"
            if kept:
                groups.append(RusageGroup(tuple(kept), g.duration_s, g.decay))
        defaults = [
            _profile_term(e) for name, e in entries.items()
            if (name not in job_names or not e.default) and e.value != 0
        ]
        for t in defaults:
            origins.setdefault(f"rusage.{t.name}", "profile")
        if defaults:
            groups.append(RusageGroup(tuple(defaults)))
        if groups:
            out.append(tuple(groups))
    return tuple(out)


def _profile_binds_shape(profile: Profile) -> list[str]:
    what = []
    if profile.rusage:
        what.append("rusage defaults")
    if profile.span is not None:
        what.append("span")
    if profile.same:
        what.append("same")
    if profile.order:
        what.append("order")
    return what


def _merge_resreq(job: ResReq, profile: Profile | None, origins: dict[str, str], warnings: list[str]) -> ResReq:
    psel = parse_select(profile.select) if profile is not None and profile.select else None
    if job.kind != "simple":
        # PROF-5
        if profile is not None:
            shape = _profile_binds_shape(profile)
            if shape:
                raise MergeError(
                    f"profile {profile.name} has {'/'.join(shape)}; compound and alternative -R "
                    f"are not supported with it (give a simple -R or use another profile)"
                )
        origins["select"] = _origin(psel is not None, True)
        return _select_into_parts(job, psel) if psel is not None else job

    pname = profile.name if profile is not None else ""
    # select (PROF-4)
    select = _and(psel, job.select)
    if select is not None:
        origins["select"] = _origin(psel is not None, job.select is not None)

    # rusage (PROF-4, MERGE-3)
    rusage = _merge_rusage(job.rusage, profile, origins, warnings)

    # span (PROF-3/PROF-4: binds)
    pspan = None
    if profile is not None and profile.span is not None:
        s = profile.span
        pspan = Span(ptile=s.ptile, hosts=s.hosts, block=s.block)
    span = job.span
    if pspan is not None:
        if job.span is not None and job.span != pspan:
            raise MergeError(
                f"span: the job asks {_span_text(job.span)} but profile {pname} requires "
                f"{_span_text(pspan)}; leave span out or give {_span_text(pspan)}"
            )
        if job.span is not None:
            warnings.append(f"span: the job's {_span_text(job.span)} is what the profile already requires")
        span = pspan
    if span is not None:
        origins["span"] = "profile" if pspan is not None else "job"

    # same (PROF-4: adding attributes is adding)
    psame = tuple(profile.same) if profile is not None else ()
    extra = tuple(a for a in job.same if a not in psame)
    redundant = [a for a in job.same if a in psame]
    if redundant:
        warnings.append(f"same: the job's same[{':'.join(redundant)}] is what the profile already requires")
    same = psame + tuple(dict.fromkeys(extra))
    if same:
        origins["same"] = _origin(bool(psame), bool(extra))

    # order (PROF-4: binds; a job order when the profile has none is fine)
    porder = tuple(OrderKey(k.name, k.desc) for k in profile.order) if profile is not None else ()
    order = job.order
    if porder:
        if job.order and job.order != porder:
            raise MergeError(
                f"order: the job asks {_order_text(job.order)} but profile {pname} requires "
                f"{_order_text(porder)}; leave order out or give {_order_text(porder)}"
            )
        if job.order:
            warnings.append(f"order: the job's {_order_text(job.order)} is what the profile already requires")
        order = porder
    if order:
        origins["order"] = "profile" if porder else "job"

    return ResReq(kind="simple", select=select, order=order, rusage=rusage, span=span, same=same)


def _merge_limit(
    key: str,
    label: str,
    unit: str,
    job_v: int | None,
    prof_v: int | None,
    pname: str,
    origins: dict[str, str],
    warnings: list[str],
) -> int | None:
    """PROF-3: a profile limit binds; the job may only tighten it."""
    if prof_v is None:
        origins[key] = "job" if job_v is not None else "default"
        return job_v
    if job_v is None:
        origins[key] = "profile"
        return prof_v
    if job_v > prof_v:
        raise MergeError(
            f"{label}: the job asks {job_v} {unit} but profile {pname} allows at most "
            f"{prof_v} {unit}; give {prof_v} {unit} or less"
        )
    if job_v == prof_v:
        warnings.append(f"{label}: the job's {job_v} {unit} is what the profile already sets")
    origins[key] = "job"
    return job_v


def _limit_text(memory: int, origin: str, pname: str, qname: str) -> str:
    """The job's memory limit as a refusal names it: "-M 4096 MB", or where it came from."""
    if origin == "profile":
        return f"{memory} MB (profile {pname}'s memory limit)"
    if origin == "queue":
        return f"{memory} MB (queue {qname}'s max_memory, the limit of a job that gives no -M)"
    return f"-M {memory} MB"


def _mem_reserved(way: list[Reserved]) -> tuple[list[Reserved], float]:
    mem = [r for r in way if r.name == "mem"]
    return mem, float(sum(r.total for r in mem))


def _check_rusage_memory(resreq: ResReq, nmin: int, nmax: int, memory: int, origins: dict[str, str],
                         pname: str, qname: str, warnings: list[str]) -> None:
    """MERGE-2 (issue 15): an rusage[mem] reservation over the job's memory limit can never
    be what the job needs, so it is refused, naming both.

    The limit (-M, or the profile's or the queue's) is the job's: the resident memory of all
    its processes together may not pass it (as LSF with LSB_JOB_MEMLIMIT=y, a per-job limit
    enforced by LSF, not the OS's per-process one). The reservation is compared as the job's
    total: each term's value times its tasks (per task, XCE's default, as LSF's
    RESOURCE_RESERVE_PER_TASK=y), its hosts (per host, at least one) or once (per job), at
    the fewest tasks the job runs with. Of rusage `||` alternatives (ways the job may run,
    LSF tries them in order), the submit is refused only when none keeps within the limit;
    one that does not is a warning naming it. At the most tasks of a range a total over the
    limit is a warning.
    Raises MergeError: "rusage[mem=8000] reserves 8000 MB per task, more than the job's memory
    limit -M 4096 MB: ...; lower one or raise the other", "rusage[mem=1000] reserves 1000 MB per
    task x 4 tasks = 4000 MB, more than ..."."""
    ways = reserve_ways(resreq, nmin, nmin)
    limit = _limit_text(memory, origins.get("memory_limit", "job"), pname, qname)
    whose = "profile " + pname + "'s " if origins.get("rusage.mem") == "profile" else ""
    over: list[str] = []
    for i, way in enumerate(ways):
        mem, total = _mem_reserved(way)
        if total <= memory:
            continue
        terms = " + ".join(f"{_fmt(r.value, 'MB')} per {r.per}" + (f" x {r.count} {r.per}s" if r.count != 1 else "")
                           for r in mem)
        written = ("the compound request's rusage[mem] terms" if resreq.kind == "compound" else "rusage[" + ":".join(
            f"mem={_num(r.value)}" + (f"/{r.per}" if r.per != "task" else "") for r in mem) + "]")
        alt = f" (rusage alternative {i + 1} of {len(ways)})" if len(ways) > 1 else ""
        if len(mem) > 1 or mem[0].count != 1:
            terms += f" = {_fmt(total, 'MB')}"
        verb = "reserve" if resreq.kind == "compound" else "reserves"
        over.append(f"{whose}{written}{alt} {verb} {terms}, more than the job's memory limit {limit}")
    if over and len(over) == len(ways):
        raise MergeError(f"{over[0]}: the limit is what all the job's processes together may use, the reservation "
                         f"what the scheduler holds for it on its hosts; lower one or raise the other")
    for text in over:  # another alternative fits: the job may run, never in this one's way
        warnings.append(f"{text}: that alternative can never be used; another keeps within the limit")
    if nmax > nmin:
        for least, way in zip(ways, reserve_ways(resreq, nmax, nmax)):
            _, total = _mem_reserved(way)
            if total > memory:
                mem, low = _mem_reserved(least)
                step = sum(float(r.value) for r in mem if r.per == "task")  # MB each further task adds
                fit = nmin + int((memory - low) // step) if step else nmin
                warnings.append(f"rusage mem: placed with {nmax} tasks (-n {nmin},{nmax}) the job would reserve "
                                f"{_fmt(total, 'MB')}, more than its memory limit {limit}; at most {fit} tasks "
                                f"keep within it (-n {nmin},{fit})")
                break


def memory_over_hosts(memory_mb: int | None, origin: str | None, hosts) -> str | None:
    """MERGE-2 (issue 15): why a job's own memory limit can never be given, or None.

    `hosts` is (name, memory MB) of every host the cluster knows (hosts.yaml and those
    joined). A job's own -M (origin "job") over the largest host's memory is refused at
    submit, as Slurm refuses a --mem no node has ("Requested node configuration is not
    available"); LSF would accept it and the limit would never be reached. A limit the job
    did not give (its profile's, or the queue's max_memory as its default) is the admin's and
    is not refused: a queue may well allow more than today's hosts have. Not applied again
    when the config changes under a pending job (the limit is a kill limit, not something a
    host must have free: such a job still runs). Returns the refusal's text."""
    if memory_mb is None or origin != "job":
        return None
    best: tuple[str, int] | None = None
    for name, mem in hosts:
        if best is None or mem > best[1]:
            best = (name, mem)
    if best is None or memory_mb <= best[1]:
        return None
    return (f"memory limit -M {memory_mb} MB is more than any host could ever give: the largest host, {best[0]}, "
            f"has {best[1]} MB; give -M {best[1]} MB or less")


def _agrees(given: object, record: object) -> bool:
    """Whether a client's exdata value `given` says nothing the merge's `record` does not: an
    object whose every key the record has with an agreeing value (part of the record, `{}`
    included), or anything else equal to it (MERGE-4)."""
    if isinstance(given, dict) and isinstance(record, dict):
        return all(k in record and _agrees(v, record[k]) for k, v in given.items())
    return given == record


def _parse_exdata(raw: dict | str | None) -> dict:
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            raise MergeError(f"exdata: not valid JSON ({e.msg} at column {e.colno}); give a JSON object") from None
    if not isinstance(raw, dict):
        raise MergeError(f"exdata: a JSON object is needed, got {type(raw).__name__}")
    return raw


# --------------------------------------------------------------------------- merge


def merge_job(
    job: JobValues,
    profile: Profile | None,
    queue: QueueConfig,
    project: object | None = None,
) -> Effective:
    """Compute a job's effective values from the job, its profile, its queue and
    (later) its project (MERGE-1). Pure; raises `MergeError` for a request that
    can never run as asked. See the module docstring for the rules."""
    del project  # MERGE-1: an input now; the projects issue fills it in
    origins: dict[str, str] = {}
    warnings: list[str] = []

    # PROF-9
    if profile is not None and profile.kind == "service":
        raise MergeError(
            f"profile {profile.name} is a service profile; a batch job needs a batch profile"
        )
    pname = profile.name if profile is not None else ""

    resreq = _merge_resreq(job.resreq, profile, origins, warnings)

    # limits (PROF-3) and queue ceilings (MERGE-2)
    plim = profile.limits if profile is not None else None
    run_limit = _merge_limit(
        "run_limit", "run limit", "s", job.run_limit_s,
        plim.run_limit_s if plim else None, pname, origins, warnings,
    )
    if run_limit is None and queue.max_run_limit_s is not None:
        run_limit = queue.max_run_limit_s  # JOB-2
        origins["run_limit"] = "queue"
    memory = _merge_limit(
        "memory_limit", "memory limit", "MB", job.memory_limit_mb,
        plim.memory_limit_mb if plim else None, pname, origins, warnings,
    )
    if memory is None and queue.max_memory_mb is not None:
        memory = queue.max_memory_mb  # JOB-2: the queue's ceiling is the limit of a job that gives none
        origins["memory_limit"] = "queue"

    tmin_p = plim.task_min if plim else None
    tmax_p = plim.task_max if plim else None
    if job.ntasks_min is None:
        if tmin_p is not None:
            nmin = tmin_p
            nmax = tmax_p if tmax_p is not None else tmin_p
            origins["ntasks"] = "profile"
        else:
            nmin = nmax = 1
            origins["ntasks"] = "default"
    else:
        nmin = job.ntasks_min
        nmax = job.ntasks_max if job.ntasks_max is not None else nmin
        if nmax < nmin:
            raise MergeError(f"-n {nmin},{nmax}: the maximum is below the minimum")
        lo = tmin_p if tmin_p is not None else 1
        if nmin < lo or (tmax_p is not None and nmax > tmax_p):
            rng = f"{lo}..{tmax_p}" if tmax_p is not None else f"{lo} or more"
            asked = f"{nmin}" if nmin == nmax else f"{nmin},{nmax}"
            raise MergeError(
                f"tasks: the job asks -n {asked} but profile {pname} allows {rng} tasks; "
                f"give -n within {rng}"
            )
        origins["ntasks"] = "job"

    if queue.max_tasks is not None:
        if nmin > queue.max_tasks:
            raise MergeError(
                f"tasks: {nmin} ({origins['ntasks']}) is over queue {queue.name}'s max_tasks "
                f"{queue.max_tasks}; give -n {queue.max_tasks} or less, or use another queue"
            )
        if nmax > queue.max_tasks:
            warnings.append(
                f"tasks: the maximum {nmax} is over queue {queue.name}'s max_tasks "
                f"{queue.max_tasks}; at most {queue.max_tasks} tasks"
            )
            nmax = queue.max_tasks
    if run_limit is not None and queue.max_run_limit_s is not None and run_limit > queue.max_run_limit_s:
        raise MergeError(
            f"run limit: {run_limit} s ({origins['run_limit']}) is over queue {queue.name}'s "
            f"max_run_limit {queue.max_run_limit_s} s; give {queue.max_run_limit_s} s or less"
        )
    if memory is not None and queue.max_memory_mb is not None and memory > queue.max_memory_mb:
        raise MergeError(
            f"memory limit: {memory} MB ({origins['memory_limit']}) is over queue {queue.name}'s "
            f"max_memory {queue.max_memory_mb} MB; give {queue.max_memory_mb} MB or less"
        )
    if memory is not None:
        _check_rusage_memory(resreq, nmin, nmax, memory, origins, pname, queue.name, warnings)

    # env (PROF-10)
    job_env = job.env  # never changed here; shared, not copied (10,000 pending jobs keep it)
    profile_env = dict(profile.env) if profile is not None else {}
    for name in sorted(set(job_env) & set(profile_env)):
        warnings.append(
            f"env {name}: the job's value {job_env[name]!r} is overridden by profile {pname}'s "
            f"{profile_env[name]!r} (the profile env wins)"
        )

    # params (PROF-6) and annotations (PROF-7)
    declared = dict(profile.params) if profile is not None else {}
    unknown = sorted(set(job.app_params) - set(declared))
    if unknown:
        if profile is None:
            valid = "the job has no profile, so no params are declared"
        elif declared:
            valid = f"profile {pname} declares: {', '.join(sorted(declared))}"
        else:
            valid = f"profile {pname} declares no params"
        raise MergeError(f"--app-param {', '.join(unknown)}: not declared; {valid}")
    app_params: dict[str, str] = {}
    for name, default in declared.items():
        if name in job.app_params:
            value = job.app_params[name]
            if len(value.encode()) > MAX_PARAM_BYTES:
                raise MergeError(
                    f"--app-param {name}: the value is {len(value.encode())} bytes; "
                    f"at most {MAX_PARAM_BYTES} bytes"
                )
            app_params[name] = value
            origins[f"param.{name}"] = "job"
            if value == default:
                warnings.append(f"param {name}: the job's {value!r} is the profile's default")
        else:
            app_params[name] = default
            origins[f"param.{name}"] = "profile"
    export_env = {PARAM_ENV_PREFIX + export_name(k): v for k, v in app_params.items()}
    if profile is not None:
        export_env.update({ANNOTATION_ENV_PREFIX + export_name(k): v for k, v in profile.annotations.items()})

    # exdata (MERGE-4)
    given = _parse_exdata(job.exdata)
    unknown_keys = [key for key in given if key not in EXDATA_KEYS]
    if unknown_keys:  # one warning however many (D-8: the warnings are stored with the job)
        shown = ", ".join(repr(k if len(k) <= 40 else k[:37] + "...") for k in unknown_keys[:5])
        more = f" and {len(unknown_keys) - 5} more" if len(unknown_keys) > 5 else ""
        warnings.append(f"exdata: unknown key{'s' if len(unknown_keys) > 1 else ''} {shown}{more} left out "
                        f"(known: {', '.join(EXDATA_KEYS)})")
    exdata: dict[str, Any] = {
        "env": {"job": job_env, "profile": profile_env},
        "limits": {
            "ntasks_min": nmin,
            "ntasks_max": nmax,
            "run_limit_s": run_limit,
            "memory_limit_mb": memory,
        },
        "app_params": dict(app_params),
    }
    if "meta" in given:
        exdata["meta"] = given["meta"]  # untouched: the very same object
    # MERGE-4: env, limits and app_params are the merge's record of what the job gets, made
    # here; a client's own, where it says otherwise, is replaced, and the job is told so
    # (an echo of a job's exdata, as `show --json` gave it, says the same and passes quietly)
    overridden = [key for key in ("env", "limits", "app_params") if key in given and not _agrees(given[key], exdata[key])]
    if overridden:
        warnings.append(f"exdata: {', '.join(repr(k) for k in overridden)} replaced by the merge's record of the "
                        f"job's effective values (MERGE-4): set them with the submit's own fields (--env, -n, "
                        f"-W, -M, --app-param), not in exdata; only 'meta' is kept as given")

    return Effective(
        resreq=shared(resreq),  # one object per distinct requirement (issue 19)
        ntasks_min=nmin,
        ntasks_max=nmax,
        run_limit_s=run_limit,
        memory_limit_mb=memory,
        job_env=job_env,
        profile_env=profile_env,
        app_params=app_params,
        export_env=export_env,
        origins=origins,
        warnings=warnings,
        exdata=exdata,
    )
