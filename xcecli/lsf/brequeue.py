"""`brequeue` (CLI-8): LSF's brequeue on XCE. Requeues jobs: a running (or stopped) job is
killed and pends again with the same job ID and submit time; a finished one pends again at
once (xcecli requeue; D-5).

    brequeue [-a] [-d] [-e] [-r] [-H] [-u USER | -u all] [-J NAME]
             [ID ... | "ID[INDEX_LIST]" ... | 0]

Which jobs it requeues, by state (IBM brequeue.1; the options as the Lava/OpenLava page words
them: "-d Requeues jobs that have finished running with DONE job status", "-e Requeues jobs
that have terminated abnormally with EXIT job status", "-r Requeues jobs that are running",
"-a Requeues all jobs including running jobs, suspending jobs, and jobs with EXIT or DONE
status"):

- no state option: running ones (RUN, USUSP), as `-r` (OpenLava's brequeue.c sends
  REQUEUE_RUN unless -d, -e, -r or -a is given; brequeue.1: "Kills a running (RUN),
  user-suspended (USUSP), or system-suspended (SSUSP) job and returns it to the queue");
- `-d` DONE ones, `-e` EXIT ones, `-r` running ones, any together; `-a` all of these.

This holds for the jobs named by ID too: a job or element in none of the chosen states is
refused, `Job <N>: the job is EXIT; ...` naming the option that takes it (XCE's words); an
array's elements are narrowed to those in the chosen states, each printed.
`-H`: "Requeues jobs to PSUSP job status": they pend held by their user until `bresume`.

Which jobs: IDs as given; `0` every job of the caller in the chosen states (with `-u USER`,
`-u all`, `-J NAME`, those they match); no ID at all is the most recently submitted of them
("By default, the brequeue command kills and requeues your most recently submitted job when
no job ID is specified", brequeue.1). None found: LSF's `No unfinished job found` (`No
DONE/EXIT job found` for -d/-e, `No job found` for both kinds, `Job <NAME> is not found`
with -J; OpenLava cmd.err.c), exit 255. Prints LSF's `Job <N> is being requeued` per job or
element, and `Job <N>: REASON` on stderr for a job refused (`No matching job found` for one
the cluster does not know). Exit codes: 0 all acted on, 255 (LSF_FAILED) any refused or a
usage error, 3 daemon unreachable. Sources: IBM's LSF 10.1 command reference,
https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/brequeue.1.html (docs/lsf-behaviour.md
sections 5 and 6, [46], [80], [81]). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import read_options, run

SPEC = {"-J": ("name", "one"), "-u": ("user", "one"), "-a": ("all", "flag"), "-d": ("done", "flag"),
        "-e": ("exit", "flag"), "-r": ("run", "flag"), "-H": ("hold", "flag")}

#: the states each option requeues (LSF's REQUEUE_RUN, REQUEUE_DONE, REQUEUE_EXIT)
RUNNING = ("RUN", "USUSP")


def chosen_states(opts: dict[str, object]) -> tuple[str, ...]:
    """The states `opts` (-a, -d, -e, -r) requeue; none of them: running ones (module docstring)."""
    if opts.get("all"):
        return (*RUNNING, "DONE", "EXIT")
    out: tuple[str, ...] = ()
    if opts.get("run"):
        out += RUNNING
    if opts.get("done"):
        out += ("DONE",)
    if opts.get("exit"):
        out += ("EXIT",)
    return out or RUNNING


def hint(states: list[str]) -> str:
    """Why a job in `states` (none of those chosen) is not requeued, and which option would."""
    st = ", ".join(states)
    if set(states) <= {"PEND", "PSUSP"}:
        return f"the job is {st}: only running and finished jobs can be requeued"
    options = (("DONE", "-d requeues DONE jobs"), ("EXIT", "-e requeues EXIT jobs"),
               ("RUN", "-r requeues running jobs"), ("USUSP", "-r requeues running jobs"))
    takes = [words for state, words in options if state in states]
    return f"the job is {st}, which brequeue does not requeue without the option for it " \
           f"({'; '.join(dict.fromkeys(takes))}; -a all of them)"


def brequeue(argv: list[str]) -> int:
    """Run `brequeue ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xcecli.lsf.common import LSF_FAILED
    from xcecli.lsf.jobctl import act, client, in_states, targets

    opts, args = read_options(argv, SPEC, interspersed=True)
    states = chosen_states(opts)
    c = client()
    refs = targets(c, args, opts.get("name"), user=opts.get("user"), states=states,  # type: ignore[arg-type]
                   last_by_default=True)
    refs, refused = in_states(c, refs, states, hint)
    for line in refused:
        print(line, file=sys.stderr)
    rc = act("brequeue", "requeue", refs, c, extra={"hold": True} if opts.get("hold") else None)
    return LSF_FAILED if refused else rc


def main() -> None:
    """The `brequeue` console script."""
    run("brequeue", lambda: brequeue(sys.argv[1:]))


if __name__ == "__main__":
    main()
