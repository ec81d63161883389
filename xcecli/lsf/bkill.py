"""`bkill` (CLI-8): LSF's bkill on XCE. Kills jobs with LSF's sequence (SIGINT, SIGTERM, then
SIGKILL, spaced by the cluster's kill_interval, LSF's JOB_TERMINATE_INTERVAL), or sends one
signal with `-s SIG`.

    bkill [-b | -stat run | pend | susp] [-s SIG | -r | -d] [-u USER | -u all] [-q QUEUE]
          [-m HOST] [-app APP] [-J NAME] [-C KILL_REASON] [ID ... | "ID[INDEX_LIST]" ... | 0]

- `ID`, `"ID[INDEX_LIST]"`: the jobs or array elements (`"138[4-5]"`, `"7[1,3,10-20:5]"`: LSF's
  `"job_ID[index_list]"`, read as bjobs reads it, xcecli.lsf.jobctl.job_args); the elements
  of one list go to the daemon in one request (JobAction.indices). The filters below are
  not applied to IDs given (as OpenLava's getJobIds).
- Filters: `-u USER` (that user's jobs; `-u all` everyone's; default the caller), `-q QUEUE`
  (jobs in that queue), `-m HOST` (elements running on that host: LSF's "jobs dispatched to
  the host"), `-app APP` (jobs submitted with that application profile), `-J NAME` (jobs of
  that name, `*` a wildcard). With `0` they select every unfinished job they match; without
  an ID, the most recently submitted one (IBM bkill.1: "If you specify the -app, -g, -J, -m,
  -u, or -q option without a job ID, the bkill command kills the last job that was
  submitted by the user who ran the command. Specify job ID 0 to kill multiple jobs.").
  `0` alone is every unfinished job of the caller. Neither an ID nor a filter is a usage
  error (OpenLava's bkill: "Job ID or one of '-m', '-u' '-q' and '-J' must be specified";
  bkill.1: "You must specify a job ID or the -app, -g, -J, -m, -u, or -q option"). When
  they match nothing: LSF's `No unfinished job found` (`Job <NAME> is not found` with -J),
  followed by ` in queue <Q>` / ` on host/group <H>` (OpenLava cmd.err.c), exit 255; an
  unknown user or queue says so, an unknown host is `HOST: Bad host name, host group name
  or cluster name`.
- `-s SIG`: send SIG (a name, `USR1` or `SIGUSR1`, or a number) instead of the sequence; to a
  running job as it is, to a pending one only KILL, TERM or INT (which kill it), STOP or
  CONT (xced.api.models.KillRequest). An unknown signal is a usage error listing the valid ones.
- `-r`: "Removes a job from the LSF system without waiting for the job to terminate in the
  operating system. Sends the same series of signals as bkill without -r, except that the
  job is removed from the system immediately" (IBM's bkill page): each unfinished element is
  EXIT at once, its exit reason "removed by USER (bkill -r); its processes are being
  killed" ("removed by USER while pending (bkill -r)" for a pending one), its slots free
  for other jobs at once, and the kill sequence still goes to its processes; their later
  end is noted in its events only (KillRequest.force, xced.controller.machine).
- `-d`: "Kills the jobs, and records the jobs as DONE after the jobs exit" (IBM's bkill
  page): the usual kill (the sequence for a running job, at once for a pending one), but
  each job it ends is DONE, not EXIT, its exit reason "killed by USER; recorded DONE (bkill
  -d)" (KillRequest.record_done); so jobs waiting on its `done()` start and those waiting
  on its `exit()` never do.

- `-stat run | pend | susp`: the jobs in that status, as LSF's bkill -stat ("Kills large
  numbers of jobs in the specified status as soon as possible ... silently skips the jobs
  that LSF cannot kill"; no job ID or filter is needed): `run` RUN, `pend` PEND, `susp`
  the suspended ones, PSUSP and USUSP (what bjobs -s lists; XCE has no SSUSP). Without an
  ID it is every job of the caller in that status that the filters match (as `0`); with
  IDs, their elements in that status, the others left alone (none of them in that status:
  `No pending job found`, exit 255). A job it cannot kill (it finished meanwhile, another
  user's) is skipped silently, exit 0, unless every job selected was skipped: then nothing
  was done, and bkill says so, exit 255. An unknown job ID is named, exit 255. With -s, `-stat pend` takes only INT,
  KILL or TERM (IBM: "The bkill -stat pend command only works with three signals that are
  specified by the -s option: INT, KILL, or TERM"); -stat and -b exclude each other.
- `-C KILL_REASON`: why the jobs are killed (IBM bkill.1: "-C kill_reason"), one line of at
  most 1,024 characters; recorded with each kill in the job's history (bhist -l) and, for a
  job that ends at once (pending, or -r), in its exit reason, as "...; kill reason: TEXT".
  Not with -s (xced.api.models.KillRequest.comment).
- `-b`: LSF's bulk kill. With `0`, every job the filters match is killed and one that
  cannot be killed is skipped silently (IBM: "If the -b option is used with bkill 0, it
  kills all applicable jobs and silently skips the jobs that cannot be killed"); it is
  ignored with -r or -s, as LSF ignores it. XCE kills them as `bkill 0` does: what LSF's
  -b saves (the per-job accounting records of lsb.acct) XCE does not write.

Prints LSF's `Job <N> is being terminated` (`is being signaled` with -s) per job, and
`Job <N>: No matching job found` / `Job <N>: Job has already finished` on stderr for a job
refused. Exit codes: 0 all acted on, 255 (LSF_FAILED) any refused or a usage error, 3 daemon
unreachable. Source: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html
(docs/lsf-behaviour.md section 5, [44]). Nextflow's LSF executor calls `bkill ID [ID...]`
and only looks at the exit code (nextflow-io/nextflow, AbstractGridExecutor.killTask).

Start-up (CLI-7): no pydantic, rich or typer on this path (tests/e2e/test_lsf_commands.py).
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import LsfUsage, read_options, run

SPEC = {"-s": ("signal", "one"), "-J": ("name", "one"), "-r": ("remove", "flag"), "-d": ("done", "flag"),
        "-u": ("user", "one"), "-q": ("queue", "one"), "-m": ("host", "one"), "-app": ("app", "one"),
        "-stat": ("stat", "one"), "-b": ("bulk", "flag"), "-C": ("comment", "one")}

#: the element states each `-stat` word selects (LSF bkill -stat run | pend | susp; `susp` as
#: bjobs -s lists suspended jobs: PSUSP and USUSP, XCE having no SSUSP)
STAT_STATES = {"run": ("RUN",), "pend": ("PEND",), "susp": ("PSUSP", "USUSP")}
#: the signals `-stat pend` takes with -s (IBM bkill.1)
PEND_SIGNALS = ("SIGINT", "SIGKILL", "SIGTERM")


def bkill(argv: list[str]) -> int:
    """Run `bkill ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.jobctl import UNFINISHED, act, client, in_states, none_found, targets

    opts, args = read_options(argv, SPEC, interspersed=True)
    sig = opts.get("signal")
    if sum(1 for k in ("signal", "remove", "done") if opts.get(k)) > 1:
        raise LsfUsage("-r, -s and -d exclude each other (LSF: [-r | -s signal | -d]); give one")
    stat = opts.get("stat")
    if stat is not None and stat not in STAT_STATES:
        raise LsfUsage(f"-stat {stat}: not a status bkill takes; give run, pend or susp")
    if opts.get("comment") is not None:
        if sig is not None:
            raise LsfUsage("-C (a kill reason) goes with a kill, not with one signal (-s); give one of them")
        from xced.model.states import kill_comment_error

        bad = kill_comment_error(str(opts["comment"]))
        if bad is not None:
            raise LsfUsage(f"-C: {bad}")
    if stat is not None and opts.get("bulk"):
        raise LsfUsage("-b and -stat exclude each other (LSF: [-b | -stat run | pend | susp]); give one")
    if sig is not None:
        from xced.model.signals import parse_signal

        try:
            signame = parse_signal(str(sig))[1]
        except ValueError as e:
            raise LsfUsage(str(e)) from None
        if stat == "pend" and signame not in PEND_SIGNALS:
            raise LsfUsage(f"-stat pend -s {sig}: a pending job takes only INT, KILL or TERM (which kill it); "
                           f"give one of those, or -stat susp for held jobs")
    c = client()
    states = STAT_STATES[stat] if stat is not None else UNFINISHED  # type: ignore[index]
    if stat is not None and not args:
        args = ["0"]  # LSF: -stat needs no job ID; it is every job in that status
    refs = targets(c, args, opts.get("name"), user=opts.get("user"), queue=opts.get("queue"),  # type: ignore[arg-type]
                   host=opts.get("host"), app=opts.get("app"), states=states)  # type: ignore[arg-type]
    if stat is not None and any(a.strip() != "0" for a in args):
        refs, _ = in_states(c, refs, states, str)  # IDs given: their elements in that status only
        if not refs:
            raise LsfUsage(none_found(None, states))
    quiet = stat is not None or bool(opts.get("bulk") and "0" in args and not (sig or opts.get("remove")))
    tally = {"acted": 0}
    rc = act("bkill", "kill", refs, c, signal=sig, record_done=bool(opts.get("done")),  # type: ignore[arg-type]
             force=bool(opts.get("remove")), skip_refused=quiet, comment=opts.get("comment"),  # type: ignore[arg-type]
             tally=tally)
    if quiet and rc == 0 and not tally["acted"]:  # every job selected was skipped: nothing was done
        raise LsfUsage(f"none of the {len(refs)} jobs selected could be killed: they have finished, or are not "
                       f"yours to kill")
    return rc


def main() -> None:
    """The `bkill` console script."""
    run("bkill", lambda: bkill(sys.argv[1:]))


if __name__ == "__main__":
    main()
