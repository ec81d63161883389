"""Console entry point of `xcecli` (and `python -m xcecli`).

`xcecli --version` is answered here, before the command definitions (Typer, click) are
imported, so that it costs about what the interpreter's own start does (issue 16), and so is
`xcecli __complete KIND PREFIX`, which the completion scripts run at each TAB; `submit`,
`jobs` and `show` go to the start-up fast path (xcecli.fast, CLI-7), which runs them when
it is sure of the command line and otherwise declines; every other call goes on to
`xcecli.app.main`. The same option is declared on the app itself, so it
shows in the help and the man page and works after global options too.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Print the version for a lone `--version`, answer `__complete KIND [PREFIX]` (the shell
    completion scripts' question, xcecli.complete), else run the app (`xcecli.app.main`)."""
    if sys.argv[1:2] == ["__complete"]:  # a TAB of the completion scripts (CLI-5): no Typer either
        from xcecli.complete import main as complete_main

        raise SystemExit(complete_main(sys.argv[2:]))
    if sys.argv[1:] == ["--version"]:
        from xced.version import version_line

        print(version_line("xcecli"))
        return
    if len(sys.argv) > 1:  # submit, jobs and show within the interpreter's start-up budget (CLI-7)
        from xcecli.fast import main as fast_main

        fast_main(sys.argv[1:])  # returns only when it declines: the Typer app takes the same argv
    from xcecli.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
