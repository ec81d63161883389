"""`bpeek` (CLI-8): LSF's bpeek on XCE: the output a job has written so far.

    bpeek [-f] [-J NAME] [ID | "ID[INDEX]"]

Prints LSF's header `<< output from stdout >>` then the job's output so far; `-f` goes on
printing what the job writes until it ends (LSF runs `tail -f`; xcecli.follow). Without an
ID: the caller's last submitted unfinished job (of that name with `-J NAME`), as LSF's
bpeek. A job that has not started: `Job <N> : Not yet started.` on stderr, exit 255; one
whose output file could not be read (a FIFO, a refused symlink, a path it could not open):
`Job <N> : has ended (DONE); its stdout file could not be opened: WHY`, exit 255. Output
over 16 MiB: its last 16 MiB from a line boundary, after a first line
`<< the first N bytes are not shown: output over 16 MiB >>`. Only the job's owner (and who may view its
project's jobs) may read it (D-7), as LSF lets only the owner and the admins run bpeek.
Exit codes: 0 shown, 255 (LSF_FAILED) a job not found, not started or a usage error, 3
daemon unreachable. Source: https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bpeek.1.html
(docs/lsf-behaviour.md section 5). Start-up (CLI-7): no pydantic, rich or typer on this path.
"""

from __future__ import annotations

import sys

from xcecli.lsf.common import LSF_FAILED, LsfUsage, read_options, run

SPEC = {"-f": ("follow", "flag"), "-J": ("name", "one")}


def bpeek(argv: list[str]) -> int:
    """Run `bpeek ARGV` (module docstring); returns the exit code. Raises LsfUsage."""
    from xced.api.errors import InvalidRequest, NotFound
    from xcecli.follow import follow, read
    from xcecli.lsf.jobctl import client, targets

    opts, args = read_options(argv, SPEC, interspersed=True)
    if len(args) > 1:
        raise LsfUsage(f"{args[1]}: bpeek takes one job ID (\"ID[INDEX]\" for an array element)")
    c = client()
    if args and args[0].strip() == "0":
        raise LsfUsage("0: bpeek takes one job ID, not 0")
    if not args and opts.get("name") is None:
        found = targets(c, ["0"], None)
        jid, idx, ref = found[-1]
    else:
        jid, idx, ref = targets(c, args, opts.get("name"), lists=False)[0]  # type: ignore[arg-type]
    try:
        text = read(c, jid, idx, "stdout")
    except NotFound:
        print(f"Job <{ref}>: No matching job found", file=sys.stderr)
        return LSF_FAILED
    except InvalidRequest as e:  # its output file could not be read: the daemon says why
        msg = e.message
        for head in (f"job {ref} ", f"job {jid} "):
            if msg.startswith(head):
                msg = msg[len(head):]
                break
        print(f"Job <{ref}> : {msg}", file=sys.stderr)
        return LSF_FAILED
    if text is None and not opts.get("follow"):
        print(f"Job <{ref}> : Not yet started.", file=sys.stderr)
        return LSF_FAILED
    print("<< output from stdout >>")
    sys.stdout.flush()
    if opts.get("follow"):
        return follow(c, jid, idx, "stdout")
    sys.stdout.write(text or "")
    return 0


def main() -> None:
    """The `bpeek` console script."""
    run("bpeek", lambda: bpeek(sys.argv[1:]))


if __name__ == "__main__":
    main()
