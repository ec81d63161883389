"""A job's record as typed values (D-5, MERGE-1, CFG-3): what its user submitted (`JobSpec`,
never changed after submit) and what the merge with its profile and queue made of it
(`EffectiveJob`, replaced whenever the job is merged again under a new config).

The store keeps both as one flat JSON object in the job's row, the form every earlier
version wrote; `to_record` and `from_record` are the one mapping between the two, and
a record written before a field existed gets that field's default. Pure data: no I/O.
Times are seconds, memory MB, task counts integers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from xced.constants import DEFAULT_UMASK


@dataclass(frozen=True, slots=True)
class OwnValues:
    """The values the job itself asked for (-n, -W, -M, app params, exdata), kept as given so
    that a new config can merge them again (MERGE-1, CFG-3). None where the user gave none."""

    ntasks_min: int | None
    ntasks_max: int | None
    run_limit_s: int | None
    memory_limit_mb: int | None
    app_params: dict[str, str] = field(default_factory=dict)
    exdata: Any = None

    def to_record(self) -> dict:
        return {"ntasks_min": self.ntasks_min, "ntasks_max": self.ntasks_max, "run_limit_s": self.run_limit_s,
                "memory_limit_mb": self.memory_limit_mb, "app_params": dict(self.app_params),
                "exdata": self.exdata}

    @classmethod
    def from_record(cls, d: dict | None) -> "OwnValues | None":
        if d is None:
            return None
        return cls(d.get("ntasks_min"), d.get("ntasks_max"), d.get("run_limit_s"), d.get("memory_limit_mb"),
                   dict(d.get("app_params") or {}), d.get("exdata"))


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the user submitted, and who the job runs as (JOB-1, JOB-4, JOB-5, D-6).

    `resreq` holds the -R strings as typed (the merged, effective one is on `EffectiveJob`);
    `array_spec` is the -J text of an array (`name[1-10]%2`) and `array_limit` its `%` limit;
    `dependency` the -w expression in canonical form; `own_hooks` the job's -E/-Ep
    ({"pre_exec": cmd, "post_exec": cmd}); `run_uid`/`run_gid` are None when the job runs as
    the daemon's user; `asserted` marks a user a test-mode caller named for itself;
    `project` and `auth_basis` are the project the API server resolved and the basis it let
    the submit in on (SUBMIT-1; a record older than projects has None and "direct")."""

    argv: tuple[str, ...]
    cwd: str
    #: the digest of the job's environment, which the store keeps (xced.controller.envs:
    #: the environment itself stays out of the daemon's memory); "" for none
    env_digest: str
    stdout: str | None
    stderr: str | None
    array_spec: str | None
    array_limit: int | None
    resreq: tuple[str, ...]
    app: str
    own_hooks: dict[str, str]
    job_values: OwnValues | None
    run_as: str
    run_uid: int | None
    run_gid: int | None
    asserted: bool
    dependency: str | None
    umask: int = DEFAULT_UMASK
    #: the project's path (PRJ-1), None in open mode without a default project
    project: str | None = None
    #: how the submit was let in (SUBMIT-1): "member", "role:NAME@/scope", "open", "direct"
    auth_basis: str = "direct"
    #: the key of the job's script (JOB-12: one read from standard input, `bsub < job.lsf`),
    #: "" for none: the store keeps the text beside the environments, once per distinct
    #: script (`script_record`), out of the daemon's memory; the worker writes it to the
    #: job's directory and runs it (xced.model.state.SCRIPT_ARG)
    script_digest: str = ""
    #: -oo / -eo (LSF bsub -oo/-eo): the stdout / stderr file is truncated when each run
    #: starts (a requeued or retried element's too), where -o / -e append to it
    stdout_overwrite: bool = False
    stderr_overwrite: bool = False
    #: an exclusive job (LSF bsub -x, docs/lsf-behaviour.md section 6): dispatched only to
    #: hosts where no job runs, which take no other job while it runs
    exclusive: bool = False
    #: the command line as typed (bsub's `sleep 1; echo hi`, run as /bin/sh -c, or `./job.sh`),
    #: shown as the job's command and default name; None: argv, quoted (`shown_command`)
    command_line: str | None = None

    @property
    def is_array(self) -> bool:
        return self.array_spec is not None

    def shown_command(self) -> str:
        """The job's command as bjobs shows it and as the default job name (LSF: "If no job
        name is specified with -J, bjobs, bhist and bacct displays the command as the job
        name", https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html):
        the command line as typed when the submit gave it, else argv quoted as a shell
        would take it."""
        if self.command_line is not None:
            return self.command_line
        import shlex

        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class EffectiveJob:
    """The merge's result for a job (MERGE-1): task range, run limit (s), memory limit (MB),
    app params, exdata, the effective resreq as text, the profile's environment and the
    variables it exports, the merge's warnings, and the hashes of the profile and config it
    came from (DISPATCH-1, CFG-3). `config_refused`: the config of `config_hash` refused
    the job, which then holds (it is refused once per config)."""

    ntasks_min: int
    ntasks_max: int
    run_limit_s: int | None
    memory_limit_mb: int | None
    app_params: dict[str, str]
    exdata: Any
    resreq: str
    profile_env: dict[str, str]
    export_env: dict[str, str]
    warnings: tuple[str, ...]
    profile_hash: str | None
    config_hash: str | None
    config_refused: bool = False

    def refused_by(self, config_hash: str) -> "EffectiveJob":
        """The same values, marked as refused by the config `config_hash`."""
        return dataclasses.replace(self, config_hash=config_hash, config_refused=True)

    def accepted(self) -> "EffectiveJob":
        """The same values without the refusal mark."""
        return dataclasses.replace(self, config_refused=False)


def to_record(spec: JobSpec, eff: EffectiveJob) -> dict:
    """The flat JSON object the store keeps for a job (every key earlier versions wrote, but
    the environment: the record names its digest, and the store keeps it once per distinct
    environment, xced.controller.envs)."""
    rec = {
        "argv": list(spec.argv), "cwd": spec.cwd, "env_digest": spec.env_digest, "stdout": spec.stdout, "stderr": spec.stderr,
        "array_spec": spec.array_spec, "array_limit": spec.array_limit, "resreq": list(spec.resreq),
        "app": spec.app, "own_hooks": dict(spec.own_hooks),
        "job_values": spec.job_values.to_record() if spec.job_values is not None else None,
        "ntasks_min": eff.ntasks_min, "ntasks_max": eff.ntasks_max, "run_limit_s": eff.run_limit_s,
        "memory_limit_mb": eff.memory_limit_mb, "app_params": dict(eff.app_params), "exdata": eff.exdata,
        "effective_resreq": eff.resreq, "profile_env": dict(eff.profile_env), "export_env": dict(eff.export_env),
        "warnings": list(eff.warnings), "profile_hash": eff.profile_hash, "config_hash": eff.config_hash,
        "run_as": spec.run_as, "run_uid": spec.run_uid, "run_gid": spec.run_gid, "asserted": spec.asserted,
        "dependency": spec.dependency, "umask": spec.umask, "project": spec.project, "auth_basis": spec.auth_basis,
    }
    if spec.script_digest:
        rec["script_digest"] = spec.script_digest
    if spec.stdout_overwrite:  # written only when set: older records read as append
        rec["stdout_overwrite"] = True
    if spec.stderr_overwrite:
        rec["stderr_overwrite"] = True
    if spec.exclusive:
        rec["exclusive"] = True
    if spec.command_line is not None:  # written only when given: older records show argv
        rec["command_line"] = spec.command_line
    if eff.config_refused:
        rec["config_refused"] = True
    return rec


def from_record(d: dict) -> tuple[JobSpec, EffectiveJob]:
    """(JobSpec, EffectiveJob) of a stored record; keys an older version did not write get
    their defaults (no job values: the job keeps its effective values at a re-merge)."""
    spec = JobSpec(
        tuple(d["argv"]), d.get("cwd") or "", sys.intern(d.get("env_digest") or ""), d.get("stdout"), d.get("stderr"),
        d.get("array_spec"), d.get("array_limit"), tuple(d.get("resreq") or ()), d.get("app") or "",
        dict(d.get("own_hooks") or {}), OwnValues.from_record(d.get("job_values")), d["run_as"], d.get("run_uid"),
        d.get("run_gid"), bool(d.get("asserted", False)), d.get("dependency"),
        d["umask"] if d.get("umask") is not None else DEFAULT_UMASK, d.get("project"), d.get("auth_basis") or "direct",
        d.get("script_digest") or "", bool(d.get("stdout_overwrite", False)), bool(d.get("stderr_overwrite", False)),
        bool(d.get("exclusive", False)),
        d.get("command_line"))
    eff = EffectiveJob(
        d["ntasks_min"], d.get("ntasks_max", d["ntasks_min"]), d.get("run_limit_s"), d.get("memory_limit_mb"),
        dict(d.get("app_params") or {}), d.get("exdata"), d.get("effective_resreq") or "",
        dict(d.get("profile_env") or {}), dict(d.get("export_env") or {}), tuple(d.get("warnings") or ()),
        d.get("profile_hash"), d.get("config_hash"), bool(d.get("config_refused", False)))
    return spec, eff


def script_record(script: str) -> tuple[str, str]:
    """(key, text) under which the store keeps a job script (JOB-12) in its table of
    environments (xced.controller.envs: a content-addressed table, one row per distinct
    text): key "script-" and the first 128 bits of the script's SHA-256 in hex (never an
    environment's digest, which is bare hex), text the script as a JSON string."""
    return "script-" + hashlib.sha256(script.encode("utf-8")).hexdigest()[:32], json.dumps(script, ensure_ascii=False)


#: the last environment env_record made a record of, with that record: (env, (digest, text))
_last_env: tuple[dict[str, str], tuple[str, str]] | None = None


def env_record(env: dict[str, str]) -> tuple[str, str]:
    """(digest, text) of an environment {name: value}: `text` its canonical JSON (sorted
    names, no spaces), `digest` the first 128 bits of that text's SHA-256, in hex (32 characters):
    the key two identical environments share in the store.

    The last environment's record is kept: a user's submits in a row carry the same
    environment, which a dict comparison tells in a tenth of the serialisation and hash
    (issue 17 part 5, CLI-7). Only an environment of text values is kept (what a submit
    carries): `{"A": 1}` equals `{"A": True}` in Python, but not in JSON."""
    global _last_env
    last = _last_env
    if last is not None and env == last[0]:
        return last[1]
    text = json.dumps(env, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    record = hashlib.sha256(text.encode()).hexdigest()[:32], text
    if all(type(k) is str and type(v) is str for k, v in env.items()):
        _last_env = (dict(env), record)
    return record
