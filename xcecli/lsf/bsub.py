"""`bsub`: LSF's submit command on XCE (CLI-8, CLI-2, JOB-12), with LSF's spellings and its
answer, `Job <N> is submitted to queue <Q>.`, so that job scripts and pipeline tools written
for LSF (dask-jobqueue, Nextflow, Snakemake, Toil ...) submit unchanged.

bsub reads its command line with the fast path's reader (xcecli.fast.read, through
xcecli.lsf.common.read_options: `-app`, `-oo`, `-Ep`, `-env`, `-cwd` are read as whole
tokens), translates LSF's options to `xcecli submit`'s (the one option table,
xced.api.submit_options.OPTIONS) and runs the very submit code `xcecli submit` runs
(xcecli.submitting.run): the same checks, `#BSUB`/`#XCE` directives of a script
(xcecli.scripts), a script on standard input (`bsub < job.lsf`), `-K`'s wait. No pydantic,
rich or typer on its path (CLI-7).

LSF's options, from IBM's bsub reference (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.man_top.1.html,
and the LSF 7.0.3 option list, http://www.cisl.ucar.edu/docs/LSF/7.0.3/command_reference/bsub.cmdref.html):

=================  ========================================================================
Taken              how XCE runs it
=================  ========================================================================
-n MIN[,MAX]       tasks (RES-3)
-R RES_REQ         repeatable, merged as LSF merges several -R (RES-1)
-q QUEUE           one queue (LSF's list of queues to choose from is refused)
-J NAME[IDX]%N     job name and arrays (JOB-4)
-o FILE, -e FILE   output files with %J and %I, appended to; FILE ending in / (or an existing
                   directory) is DIR/ID.out, DIR/ID.err (JOB-12)
-oo FILE, -eo FILE the same files, overwritten: truncated at the start of each run (a requeued
                   or retried run overwrites the earlier run's output, as LSF's does)
-W [H:]M           run limit (JOB-2)
-M SIZE            memory limit, MB without a unit (XCE's lsf.conf: LSF_UNIT_FOR_LIMITS=MB)
-P PROJECT         project path (PRJ-1); LSF's flat name NAME (no leading '/') is the
                   top-level project /NAME
-app NAME          application profile (xcecli submit's -a; LSF's own -a is esub, refused)
-w EXPR            dependencies (JOB-5)
-K                 wait for the job and exit with its exit code (CLI-1)
-E CMD, -Ep CMD    the job's own pre/post-exec (JOB-7)
-env SPEC          "all" (the default), "none", "all, VAR=val, ..." or "VAR[=val], ...":
                   the environment the job starts from and what it adds
-cwd DIR           the job's working directory
-H                 hold the job at submit: PSUSP with a user hold until `xcecli resume` (D-5)
-x                 exclusive job: dispatched only to hosts where no other job runs, and while
                   it runs no other job goes there; every queue allows it (LSF needs the
                   queue's EXCLUSIVE=Y; docs/lsf-behaviour.md section 6)
-pack FILE         job packs: one job per line of FILE, each line bsub's options and a
                   command ("normal bsub syntax but omitting the word bsub", IBM:
                   https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.pack.1.html),
                   given alone; submitted as `xcecli submit --pack` submits (one request,
                   all or none), `Job <N> is submitted to queue <Q>.` per job
=================  ========================================================================

The command and its arguments are a command line, joined by spaces as LSF's bsub joins them
(an argument holding a blank stays one argument; xcecli.submitting.shell_line) and run with
/bin/sh -c as LSF runs it ("The command can be anything that is provided to a UNIX Bourne
shell", https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.zz1argument.command.1.html):
`bsub "prog < in > out"`, `bsub 'sleep 1; echo hi'`, `bsub 'echo $HOME'`, `bsub ./job.sh a
'>' f` (the script's output goes to f). A first word that is a script file (`bsub ./job.sh
ARGS`) has its #BSUB/#XCE directives read, and runs through the same shell line, by its
absolute path, with the interpreter its #! names when it is not executable
(xcecli.submitting.shell_script_path). Nothing is looked up at submit: a shell builtin
(`bsub cd /tmp`) runs, and a command found nowhere (`bsub nosuchcmd`) is the job's shell's
to report, so the job ends EXIT with exit code 127, as in LSF. The line as typed is the
job's command and default name (bjobs COMMAND, JOB_NAME and -l, bhist -l, LSB_JOBNAME),
as in LSF. `xcecli submit` keeps its argv, exec'd as given.

Accepted with a warning on stderr, naming the option (the job runs as it would in LSF, only
without the bookkeeping or notice): -B, -N, -u (mail), -G (user group), -g (job group),
-sp (user priority), -r, -rn (rerunnable: XCE's profile says what a host failure does),
-We (estimated run time), -Lp (licence project), -sla (service class), -s (window signal),
-k (checkpoint), -Zs (spool the command file: a script on stdin is stored with the job
anyway), -ul (pass the user's limits: the job keeps the submitter's environment).

Refused, because ignoring them would change what the job does: -I, -Ip, -Is, -IS, -ISp, -ISs, -IX (interactive);
-m (hosts), -b (begin time), -t (termination time), -i, -is (stdin file), -Q (requeue exit
values), -c, -p, -C, -D, -F, -S, -T, -v (per-process and CPU limits), -wa, -wt (warning
action), -a (esub), -f (file transfer), -U (reservation), -ext, -extsched, -gpu, -data,
-L (login shell), -XF (X11), -jsdl, -jsdl_strict, -mig.
Any other option is a usage error listing the options bsub takes. A script's `#BSUB` lines
take the same table (xcecli.scripts), but -K and -env, which are taken on the command line
only; a `#BSUB -cwd DIR` is relative to the submission directory, and -cwd on the command
line wins over it.

-J takes what LSF's -J takes (`check_job_name`): a name of up to 4094 characters without
control characters, or an array NAME[INDEX_LIST]%LIMIT with unique positive indices; any
other value is refused, saying what is valid.

-K prints LSF's lines on stderr (openlava's lsf/lib/nios.c, and the output LSF users
quote): `<<Waiting for dispatch ...>>`, `<<Starting on HOST>>` once the job starts (its
first host), and `<<Job is finished>>`, or `<<Terminated while pending>>` for a job that
ended without starting.

Exit codes: LSF's 255 for every failure to submit (`failing_with_255`): a usage error, a
refused option, a bad `#BSUB` line (named by script and line), the daemon's refusal, a
daemon that cannot be reached; the message on stderr. With -K the job's own exit code, 126
when it was killed before it started (docs/lsf-behaviour.md section 5).
"""

from __future__ import annotations

import os
import sys

from xced.api.errors import InvalidRequest
from xcecli.lsf.common import LsfUsage, ShowUsage, read_options

#: LSF's option -> (xcecli submit's long name, kind), for the options bsub takes
TAKEN = {"-n": ("ntasks", "one"), "-R": ("resreq", "list"), "-q": ("queue", "one"), "-J": ("name", "one"),
         "-o": ("stdout", "one"), "-e": ("stderr", "one"), "-oo": ("stdout_overwrite", "one"),
         "-eo": ("stderr_overwrite", "one"), "-W": ("run_limit", "one"), "-M": ("memory", "one"),
         "-P": ("project", "one"), "-app": ("app", "one"), "-w": ("dependency", "one"), "-K": ("wait", "flag"),
         "-E": ("pre_exec", "one"), "-Ep": ("post_exec", "one"), "-env": ("lsf_env", "one"),
         "-cwd": ("lsf_cwd", "one"), "-H": ("hold", "flag"), "-x": ("exclusive", "flag"),
         "-pack": ("lsf_pack", "one")}

#: options accepted and ignored with a warning: option -> (kind, what it is in LSF)
WARNED = {"-B": ("flag", "mail at dispatch"), "-N": ("flag", "mail at the job's end"),
          "-u": ("one", "mail user"), "-G": ("one", "user group"), "-g": ("one", "job group"),
          "-sp": ("one", "user-assigned job priority"), "-r": ("flag", "rerunnable job"),
          "-rn": ("flag", "not rerunnable"), "-We": ("one", "estimated run time"),
          "-Lp": ("one", "licence project"), "-sla": ("one", "service class"),
          "-s": ("one", "signal at a run window's end"), "-k": ("one", "checkpointing"),
          "-Zs": ("flag", "spooling the command file"), "-ul": ("flag", "passing the user's limits")}

#: options refused: option -> (kind, why ignoring it would change what the job does)
REFUSED = {
    "-I": ("flag", "interactive job"), "-Ip": ("flag", "interactive job"), "-Is": ("flag", "interactive job"),
    "-IS": ("flag", "interactive job"), "-ISp": ("flag", "interactive job"), "-ISs": ("flag", "interactive job"),
    "-IX": ("flag", "interactive job"), "-XF": ("flag", "X11 forwarding"),
    "-m": ("one", "host selection: the job could run on other hosts; use -R \"select[...]\""),
    "-b": ("one", "begin time: the job could start before it"),
    "-t": ("one", "termination time: the job would not be ended then"),
    "-i": ("one", "standard input file"), "-is": ("one", "standard input file"),
    "-Q": ("one", "requeue exit values"), "-c": ("one", "CPU time limit"), "-p": ("one", "process limit"),
    "-C": ("one", "core file size limit"), "-D": ("one", "data segment limit"), "-F": ("one", "file size limit"),
    "-S": ("one", "stack limit"), "-T": ("one", "thread limit"), "-v": ("one", "swap limit"),
    "-wa": ("one", "warning action"), "-wt": ("one", "warning time"),
    "-a": ("one", "esub application (XCE's application profile is -app)"),
    "-f": ("one", "file transfer"), "-U": ("one", "advance reservation"), "-ext": ("one", "external scheduler"),
    "-extsched": ("one", "external scheduler"), "-gpu": ("one", "GPU request"), "-data": ("one", "data requirement"),
    "-L": ("one", "login shell"), "-jsdl": ("one", "JSDL file"), "-jsdl_strict": ("one", "JSDL file"),
    "-mig": ("one", "migration threshold"),
}

#: the whole table the reader takes: flag -> (name, kind); warned and refused options are
#: read under their own flag, so that a value after them is never taken for the command
SPEC: dict[str, tuple[str, str]] = {**TAKEN, **{f: (f, k) for f, (k, _) in {**WARNED, **REFUSED}.items()}}
#: what `-h` prints
USAGE = ("Usage: bsub [options] command [arguments]\n"
         "       bsub [options] script        (#BSUB and #XCE lines at its top are read)\n"
         "       bsub [options] < script\n"
         "       bsub -pack FILE               (one job per line: bsub's options and a command)\n"
         "Options: " + " ".join(TAKEN) + "\n"
         "Accepted and ignored with a warning: " + " ".join(WARNED) + "\n")


def translate(values: dict[str, object]) -> tuple[dict, list[str], str | None, str | None]:
    """bsub's option values (read with SPEC) -> (the submit options they give, by
    xcecli submit's long names, in xcecli.submitting.run's `opts` form; warnings, one per
    ignored option; the -env value or None; the -cwd value or None). LSF's flat project name
    (`-P DaskonLSF`: LSF's project names have no hierarchy) is the top-level project
    `/DaskonLSF`. Raises LsfUsage for a refused option (naming it and why), -o with -oo (or
    -e with -eo), a list of queues, or a -J value LSF would not take (`check_job_name`)."""
    opts: dict = {}
    warnings: list[str] = []
    for flag, (kind, why) in REFUSED.items():
        if flag in values:
            raise LsfUsage(f"{flag} ({why.split(':')[0]}) is not supported by XCE"
                           + (f": {why.split(':', 1)[1].strip()}" if ":" in why else "")
                           + "; the job was not submitted")
    for flag, (kind, what) in WARNED.items():
        if flag in values:
            warnings.append(f"{flag} ({what}) is not supported by XCE and was ignored")
    for a, b, name in (("-o", "-oo", "stdout"), ("-e", "-eo", "stderr")):
        if name in values and name + "_overwrite" in values:
            raise LsfUsage(f"give {a} or {b}, not both: {a} appends to the file, {b} overwrites it")
    if isinstance(values.get("name"), str):
        check_job_name(values["name"])  # type: ignore[arg-type]
    queue = values.get("queue")
    if isinstance(queue, str) and len(queue.split()) > 1:
        raise LsfUsage(f"-q {queue!r}: XCE takes one queue per job, not a list to choose from; give one of them")
    for name, value in values.items():
        if name in ("lsf_env", "lsf_cwd", "lsf_pack") or name.startswith("-"):
            continue
        opts[name] = value
    project = opts.get("project")
    if isinstance(project, str) and project and not project.startswith("/"):
        opts["project"] = "/" + project  # LSF's project names are flat: NAME is XCE's top-level /NAME (PRJ-1)
    return opts, warnings, values.get("lsf_env"), values.get("lsf_cwd")  # type: ignore[return-value]


#: the longest job name LSF takes: "The job name ... can contain up to 4094 characters" (IBM bsub -J,
#: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__j.1.html)
MAX_JOB_NAME = 4094
#: what a -J value may be, said in every refusal of one
VALID_NAME = ("a name of 1 to 4094 characters without control characters (e.g. -J sweep), or an array "
              "NAME[INDEX_LIST]%LIMIT whose INDEX_LIST is START[-END[:STEP]],... of unique positive integers (e.g. "
              "-J 'sweep[1-100:2,200]%10')")


def check_job_name(value: str) -> None:
    """Hold a -J value (command line, `#BSUB -J`, a -pack line) to what LSF takes (IBM bsub
    -J, https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.__j.1.html: "up to
    4094 characters", "job_name[index_list]%job_slot_limit", indices "positive integers";
    the job array page, https://ibm.com/support/knowledgecenter/SSWRJV_10.1.0/lsf_admin/job_arrays_lsf.html:
    an arrayName, and index values that are "unique positive integers"). Raises LsfUsage
    saying what was wrong and what is valid (VALID_NAME) for: a blank name, one over
    MAX_JOB_NAME characters, a control character (newline, tab: a name is one line of
    bjobs), an array part that does not parse (`name[1-`), an array without a name
    (`[1-3]`), or an index listed twice (`b[1,1,1]`)."""
    from xced.model.jobs import _RANGE_RE, ArraySpecError, first_control, parse_job_name
    from xced.model.units import MAX_ARRAY_SIZE_SETTING

    shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    if not value.strip():
        raise LsfUsage(f"-J {shown}: the job name is empty or blank; give {VALID_NAME}")
    if len(value) > MAX_JOB_NAME:
        raise LsfUsage(f"-J {shown}: the job name has {len(value)} characters, more than the {MAX_JOB_NAME} LSF "
                       f"takes; give {VALID_NAME}")
    bad = first_control(value)
    if bad is not None:
        raise LsfUsage(f"-J {shown}: the job name holds a control character ({bad!r}); give {VALID_NAME}")
    if "[" not in value and "]" not in value and "%" not in value:
        return
    try:  # the daemon holds the array to its own max_array_size; here the grammar and the ceiling
        name, array = parse_job_name(value, MAX_ARRAY_SIZE_SETTING)
    except ArraySpecError as e:
        raise LsfUsage(f"-J: {e}") from None
    if array is None:
        return
    if not name.strip():
        raise LsfUsage(f"-J {shown}: the job array has no name; write the name before its index list, e.g. "
                       f"-J 'myarray{value[value.index('['):]}'")
    listed = 0
    for part in value[value.index("[") + 1:value.rindex("]")].split(","):
        m = _RANGE_RE.fullmatch(part.strip())
        if m is not None:
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) is not None else start
            listed += (end - start) // int(m.group(3) or 1) + 1
    if listed != len(array.indices):
        twice = listed - len(array.indices)
        raise LsfUsage(f"-J {shown}: the index list names {twice} {'index' if twice == 1 else 'indices'} more than once; "
                       f"LSF's indices are unique positive integers: list each index once (e.g. -J "
                       f"'{name}[1-3]')")


def environment(spec: str | None, base: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """LSF's -env (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_command_ref/bsub.__env.1.html):
    "none" (the job starts from no submission environment), "all" (the default: all of it),
    "all, VAR=val, ..." (all of it, with these set), "VAR[=val], ..." (only these: a bare
    VAR takes its submission value). Returns (the environment the job starts from, the
    VAR=val settings as --env items). Raises LsfUsage for a malformed item."""
    if spec is None:
        return base, []
    items = [i.strip() for i in spec.split(",")]
    if items == ["none"]:
        return {}, []
    if "none" in items:
        raise LsfUsage(f"-env {spec!r}: 'none' is given alone")
    start = dict(base) if items and items[0] == "all" else {}
    if items and items[0] == "all":
        items = items[1:]
    sets: list[str] = []
    for item in items:
        name, eq, _ = item.partition("=")
        if not name.strip() or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise LsfUsage(f"-env {spec!r}: {item!r} is not VAR or VAR=value; write -env \"none\", \"all\", "
                           f"\"all, VAR=value\" or \"VAR1, VAR2=value\"")
        if eq:
            sets.append(item)
        elif name in base:
            start[name] = base[name]
    return start, sets


def directive_options(words: list[str]) -> tuple[dict, list[str], list[str]]:
    """A `#BSUB` line's words -> (submit options, arguments, warnings), for xcecli.scripts;
    a -cwd DIR is given as option "_cwd" (the job's working directory, which the command
    line's -cwd overrides). -K and -env are taken on the command line only (they say how
    bsub runs and what it sends, fixed before the script is read). Raises ValueError for an
    option bsub refuses or does not know."""
    try:
        values, args = read_options(words, SPEC, interspersed=True)
        for name in ("wait", "lsf_env", "lsf_pack"):
            if name in values:
                flag = {"wait": "-K", "lsf_env": "-env", "lsf_pack": "-pack"}[name]
                raise LsfUsage(f"{flag} is taken on the bsub command line only, not in a script")
        opts, warnings, _, cwd = translate(values)
    except LsfUsage as e:
        raise ValueError(str(e)) from None
    if cwd is not None:
        opts["_cwd"] = cwd
    return opts, args, warnings


def _line(answer: dict) -> str:
    """LSF's answer for a job or an array alike: `Job <N> is submitted to queue <Q>.`"""
    return f"Job <{answer['job_id']}> is submitted to queue <{answer['queue']}>."


def bsub(argv: list[str]) -> int | None:
    """Run `bsub ARGV`: read LSF's options, warn about the ignored ones, and submit through
    xcecli.submitting.run with LSF's answer line. Returns None (exit 0); raises LsfUsage,
    SystemExit (-K: the job's exit code) or the API's typed errors."""
    from xced.api.submit_options import OPTIONS
    from xcecli.fast import _client_of
    from xcecli.submitting import ScriptRefused, client_env, run
    from xcecli.usage import Usage

    if argv == ["--help"]:
        argv = ["-h"]
    try:  # -h / -V among the options (before the command), as every LSF command takes them
        values, command = read_options(argv, SPEC, interspersed=False)
    except ShowUsage as e:
        if e.what != "help":
            raise  # -V: common.run prints the version line every LSF command prints
        sys.stderr.write(USAGE)  # IBM bsub -h: "Prints command usage to stderr and exits"
        return 0
    if "lsf_pack" in values:
        return _pack(values, command)
    given, warnings, env_spec, cwd = translate(values)
    for w in warnings:
        print(f"bsub: warning: {w}", file=sys.stderr)
    base, sets = environment(env_spec, client_env())
    opts: dict = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None for o in OPTIONS}
    opts.update(given)
    if sets:
        opts["env"] = list(sets)
    if cwd is not None:
        try:
            here = os.getcwd()
        except FileNotFoundError:
            here = "/"
        cwd = os.path.normpath(os.path.join(here, os.path.expanduser(cwd)))
        if not os.path.isdir(cwd):
            raise LsfUsage(f"-cwd {values['lsf_cwd']!r}: no such directory")
    try:
        run(opts, list(command), _client_of({}), base_env=base, cwd=cwd, say=_line, prog="bsub", shell=True)
    except (Usage, ScriptRefused) as e:  # LSF's exit code for a refused bsub, 255
        raise LsfUsage(e.message) from None
    except InvalidRequest as e:
        if e.field == "project" and "no such project" in e.message:  # say how a flat LSF name was read
            raise type(e)(f"{e.message}; bsub reads an LSF project name without a leading '/' (-P NAME) as the "
                          f"top-level project /NAME", field=e.field) from None
        raise
    return None


#: the options a bsub -pack line may not give: they say how bsub runs, or what one request sends
_NOT_IN_A_PACK = {"wait": "-K", "lsf_env": "-env", "lsf_cwd": "-cwd", "lsf_pack": "-pack"}


def pack_line(words: list[str]) -> tuple[dict, list[str]]:
    """One line of a `bsub -pack` file, its words as a shell splits them: bsub's options
    (SPEC, translated as on the command line) and the command, as IBM describes the file:
    "one job request per line, using normal bsub syntax but omitting the word bsub"
    (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bsub.pack.1.html). Returns
    (opts as xcecli.submitting.run takes them, the command); raises ValueError for an
    option bsub refuses or does not know, or one a pack line may not give (-K as in LSF;
    -env, -cwd: the pack is one request from one environment and directory)."""
    from xced.api.submit_options import OPTIONS

    try:
        values, command = read_options(words, SPEC, interspersed=False)
        for name, flag in _NOT_IN_A_PACK.items():
            if name in values:
                raise LsfUsage(f"{flag} is not taken on a -pack line (give it to a bsub of its own)")
        given, warnings, _, _ = translate(values)
    except LsfUsage as e:  # the pack's own message says that nothing was submitted
        raise ValueError(str(e).replace("; the job was not submitted", "")) from None
    for w in warnings:
        print(f"bsub: warning: {w}", file=sys.stderr)
    opts: dict = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None for o in OPTIONS}
    opts.update(given)
    return opts, command


def _pack(values: dict, command: list[str]) -> None:
    """`bsub -pack FILE`: alone on the command line, as in LSF ("Do not use with any other
    bsub option"); every line's job in one request (xcecli.submitting.run_pack, as
    `xcecli submit --pack`), each command a shell command line. Raises LsfUsage."""
    from xced.api.submit_options import OPTIONS
    from xcecli.fast import _client_of
    from xcecli.submitting import PackRefused, run_pack
    from xcecli.usage import Usage

    other = [f for f, (name, _) in SPEC.items() if name in values and name != "lsf_pack"]
    if other or command:
        raise LsfUsage(f"-pack FILE is given alone: each line of FILE holds its job's options and command (got "
                       f"{' '.join(other + list(command[:1]))} beside it)")
    opts: dict = {o.name: False if o.kind == "flag" else [] if o.kind in ("list", "map") else None for o in OPTIONS}
    opts["pack"] = values["lsf_pack"]
    try:
        run_pack(opts, [], _client_of({}), read_line=pack_line, shell=True, prog="bsub", say=_line)
    except (Usage, PackRefused) as e:  # said with bsub's spelling of the option
        raise LsfUsage(e.message[1:] if e.message.startswith("--pack") else e.message) from None


def failing_with_255(argv: list[str]) -> int | None:
    """`bsub(argv)` with LSF's exit code for every failure: 255, the message on stderr. LSF's
    bsub ends `exit(do_sub(...))`, and do_sub returns -1 for whatever kept the job from
    being submitted, its own checks and mbatchd's refusal alike (openlava lsbatch/cmd/bsub.c
    and cmd.sub.c, docs/lsf-behaviour.md [74]). So a refusal by the daemon (xcecli's 1), a
    daemon that cannot be reached (xcecli's 3) and an unexpected error are 255 here, said
    as xcecli says them (`bsub: error: MESSAGE`; xced.api.funnel.exit_code_of). What is not
    a failure keeps its code: -K's exit code of the job (SystemExit), ^C (130), a reader
    gone from stdout (0, silent)."""
    from xced.api.funnel import _debug, exit_code_of
    from xcecli.lsf.common import LSF_FAILED
    from xcecli.submitting import RefusalShown

    try:
        return bsub(argv)
    except RefusalShown:  # the daemon's refusal, printed with its caret
        return LSF_FAILED
    except (LsfUsage, ShowUsage, SystemExit, KeyboardInterrupt, EOFError, BrokenPipeError):
        raise  # common.run's and the funnel's: each its own code
    except Exception as e:
        if _debug():
            raise
        exit_code_of(e, "bsub")  # prints the one line
        return LSF_FAILED


def main() -> None:
    """Console entry point of `bsub` (and `python -m xcecli.lsf.bsub`). Never returns."""
    from xcecli.lsf.common import run

    run("bsub", lambda: failing_with_255(sys.argv[1:]))


if __name__ == "__main__":
    main()
