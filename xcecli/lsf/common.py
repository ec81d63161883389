"""What the LSF commands (xcecli.lsf) share: reading a command line with LSF's spellings,
LSF's usage errors, and the error funnel (CLI-8, CLI-1).

LSF's commands print a usage error and exit 255 (LSF's exit code for a failed command, as
`bjobs` exits 255 for a job it does not know: docs/lsf-behaviour.md section 5); XCE's own
exit codes (1 refused, 3 daemon unreachable) are kept for errors the daemon gives, through
the same funnel as xcecli (xced.api.funnel).
"""

from __future__ import annotations

import sys

from xcecli.fast import Decline, Spec, read

#: LSF's exit code for a command that failed (a usage error, a job it does not know)
LSF_FAILED = 255


#: the lines of bkill's, bstop's and bresume's usage that tell how they choose jobs
#: (xcecli.lsf.jobctl.targets)
_FILTERS = ("  -u USER  that user's jobs (-u all: everyone's); default yours\n"
            "  -q QUEUE the jobs in that queue\n"
            "  -m HOST  the jobs running on that host\n"
            "  -app PROFILE  the jobs submitted with that application profile\n"
            "  -J NAME  the jobs of that name (* a wildcard)\n"
            '  "ID[INDEX_LIST]"  array elements: 1,3,5-9 or 1-10:2 (one request)\n'
            "  0        every unfinished job the filters match (alone: all of yours)\n"
            "  filters without an ID: the most recently submitted job they match\n")

#: each command's usage, what `-h` prints to stderr (LSF: "-h Prints command usage to stderr
#: and exits", the same words on each command's page of the LSF 10.1 command reference, e.g.
#: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/lsid.1.html). bsub and bjobs
#: print their own (xcecli.lsf.bsub.USAGE, xcecli.lsf.bjobs.USAGE).
USAGES = {
    "bkill": 'bkill [-h] [-V] [-b | -stat run | pend | susp] [-s SIG | -r | -d] [-u USER | -u all] [-q QUEUE]\n'
             '      [-m HOST] [-app PROFILE] [-J NAME] [-C KILL_REASON] [ID ... | "ID[INDEX_LIST]" ... | 0]\n'
             "  -s SIG   send SIG (USR1, SIGUSR1 or a number) instead of the kill sequence\n"
             "  -r       remove at once (EXIT now, slots freed); the processes are killed after\n"
             "  -d       kill, and record the jobs DONE\n"
             "  -stat S  the jobs in status S: run (RUN), pend (PEND), susp (PSUSP, USUSP); no ID\n"
             "           needed; those that cannot be killed are skipped silently\n"
             "  -b       with 0: skip silently the jobs that cannot be killed\n"
             "  -C TEXT  why: recorded with each kill in the job's history (not with -s)\n"
             + _FILTERS,
    "bstop": 'bstop [-h] [-V] [-u USER | -u all] [-q QUEUE] [-m HOST] [-app PROFILE] [-J NAME]\n'
           '      [ID ... | "ID[INDEX_LIST]" ... | 0]\n'
           "  suspends the jobs (USUSP)\n"
           + _FILTERS,
    "bresume": 'bresume [-h] [-V] [-u USER | -u all] [-q QUEUE] [-m HOST] [-app PROFILE] [-J NAME]\n'
             '        [ID ... | "ID[INDEX_LIST]" ... | 0]\n'
             "  resumes suspended jobs\n"
             + _FILTERS,
    "brequeue": 'brequeue [-h] [-V] [-a] [-d] [-e] [-r] [-H] [-u USER | -u all] [-J NAME]\n'
                '         [ID ... | "ID[INDEX_LIST]" ... | 0]\n'
                "  kills running jobs and puts them back to PEND; finished ones pend again at once\n"
                "  -r       requeue running jobs (RUN, USUSP): the default\n"
                "  -e       requeue EXIT jobs\n"
                "  -d       requeue DONE jobs\n"
                "  -a       requeue all of these (running, EXIT, DONE)\n"
                "  -H       requeue held (PSUSP) until bresume\n"
                "  -u USER  that user's jobs (-u all: everyone's); default yours\n"
                "  -J NAME  the jobs of that name (* a wildcard)\n"
                '  "ID[INDEX_LIST]"  array elements: 1,3,5-9 or 1-10:2 (one request)\n'
                "  0        every job in those states (with -u, -J: that they match)\n"
                "  no ID    your most recently submitted job in those states\n",
    "bpeek": 'bpeek [-h] [-V] [-f] [-J NAME] [ID | "ID[INDEX]"]\n'
             "  -f       go on printing the output until the job ends (tail -f)\n"
             "  -J NAME  your last submitted unfinished job of that name\n"
             "  without an ID: your last submitted unfinished job\n",
    "bhist": 'bhist [-h] [-V] [-l] [-a] [-n N | -n MIN,MAX] [ID | "ID[INDEX]" ...]\n'
             "  -l  the long form: each job's history in full\n"
             "  -a  finished jobs too\n"
             "  -n  how many event log files to search (0: all); XCE keeps one event store,\n"
             "      never rotated, so every search reads all of it\n",
    "bwait": 'bwait [-h] [-V] -w "EXPR" [-t MINUTES]\n'
             '  -w "EXPR"    the condition: done(ID), ended(ID), exit(ID), started(ID), with &&, || and !\n'
             "  -t MINUTES   give up after this many minutes\n",
    "bqueues": "bqueues [-h] [-V] [-w | -l] [QUEUE ...]\n"
               "  -w  wide: names in full\n"
               "  -l  long: each queue's parameters, limits and statistics\n",
    "bhosts": "bhosts [-h] [-V] [-w | -l] [HOST ...]\n"
              "  -w  wide: names and statuses in full (closed_Adm ...)\n"
              "  -l  long: each host's status, slots, current load and reserved memory\n",
    "bparams": "bparams [-h] [-V] [-a | -l]\n"
               "  -a, -l  every parameter, by LSF's names and XCE's\n",
    "badmin": "badmin [-h] [-V] showconf mbd\n"
              "  showconf mbd  the batch daemon's parameters in force\n",
    "lsid": "lsid [-h] [-V]\n",
}


class ShowUsage(Exception):
    """`-h` ("help") or `-V` ("version") was given: run() prints the command's usage (USAGES)
    or its version to stderr and exits 0, as LSF's commands do."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def version_text() -> str:
    """What `-V` prints (to stderr, as LSF's commands do), lsid's first line:
    "XCE VERSION, LSF-compatible commands (CLI-8)"."""
    from xced.version import version

    return f"XCE {version()}, LSF-compatible commands (CLI-8)"


class LsfUsage(Exception):
    """A command line an LSF command refuses: its message names what was wrong and what
    would be valid. Exit code LSF_FAILED (255)."""

    exit_code = LSF_FAILED


def read_options(argv: list[str], spec: Spec, *, interspersed: bool) -> tuple[dict[str, object], list[str]]:
    """xcecli.fast.read for an LSF command: (values by name, positional arguments). An
    option `spec` does not have, or one missing its value, raises LsfUsage naming it and
    listing the options the command takes. The word after an option that takes a value is
    its value even when it starts with '-' (`bsub -n -1`, `bkill -s -9`), as LSF reads it:
    the option's own check then says what is wrong with the value. `-h` and `-V`, which
    every LSF command takes, are read here for a `spec` without them and raise ShowUsage
    (run() prints the usage or the version and exits 0); `-h` wins over `-V` and over
    everything else."""
    full = {**spec}
    full.setdefault("-h", ("_help", "flag"))
    full.setdefault("-V", ("_version", "flag"))
    try:
        opts, args = read(argv, full, interspersed=interspersed, dash_values=True)
    except Decline as e:
        bad = str(e)
        known = " ".join(sorted(full))
        raise LsfUsage(f"{bad}: not an option this command takes, or its value is missing; "
                       f"the options are: {known}") from None
    if opts.pop("_help", None):
        raise ShowUsage("help")
    if opts.pop("_version", None):
        raise ShowUsage("version")
    return opts, args


def run(prog: str, fn) -> None:
    """Run `fn()` (returns an exit code or None) as LSF command `prog` and exit: LsfUsage is
    `PROG: MESSAGE` on stderr and exit 255; every other error goes through xcecli's funnel
    (xced.api.funnel.exit_code_of). Never returns."""
    from xced.api.funnel import run_fast

    def guarded():
        try:
            return fn()
        except ShowUsage as e:
            if e.what == "version":
                print(version_text(), file=sys.stderr)
                return 0
            if prog not in USAGES:  # bsub reads its own -h (xcecli.lsf.bsub)
                print(f"{prog}: -h: not an option here; `{prog} -h` alone prints the usage", file=sys.stderr)
                return LSF_FAILED
            sys.stderr.write("Usage: " + USAGES[prog])
            return 0
        except LsfUsage as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return e.exit_code

    run_fast(guarded, prog)


def named(items: list[dict], names: list[str], what: str) -> tuple[list[dict], int]:
    """The `items` (each with a "name") that a command's arguments name, in their order, or
    all of them when it names none (LSF's bhosts, bqueues: `bqueues [queue_name ...]`);
    and its exit code so far: each name the cluster has not is `NAME: No such WHAT` on
    stderr and makes it LSF_FAILED (255), as LSF's bhosts and bqueues say."""
    by_name = {i["name"]: i for i in items}
    rc = 0
    for n in names:
        if n not in by_name:
            print(f"{n}: No such {what}", file=sys.stderr)
            rc = LSF_FAILED
    return ([by_name[n] for n in names if n in by_name] if names else list(items)), rc
