"""`xceadmin init DIR`: a TopDir skeleton with commented example config (CLI-4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

HELP = (
    "Make a TopDir skeleton in DIR: commented config/xce.yaml, queues.yaml and hosts.yaml, "
    "and projects.yaml and rbac.yaml with every key shown but commented out, and one example "
    "server preset, config/presets/site-default.yaml.\n\n"
    "The files describe this machine (one host, the current user as admin); with no project "
    "defined the cluster is in open mode. Refuses if DIR already has a config."
)


def init(
    directory: Annotated[
        str,
        typer.Argument(metavar="DIR", help="TopDir to create (parents are made as needed).", show_default=False),
    ],
) -> None:
    import shlex

    from xced.config import templates
    from xced.config.loader import CONFIG_DIR, REQUIRED_FILES
    from xced.config.personal import _comment_safe, _write, write_skeleton
    from xced.config.projects import PROJECTS_FILE, RBAC_FILE
    from xced.config.topdir import UnsafeDirectory, make_layout

    SITE_PRESET = "presets/site-default.yaml"

    def fail(message: str) -> typer.Exit:
        typer.echo(f"xceadmin init: error: {message}", err=True)
        return typer.Exit(1)

    if not directory.strip():  # a script's unset variable: never the current directory
        raise typer.BadParameter("DIR is empty; give the TopDir to make, e.g. /srv/xce", param_hint="'DIR'")
    given = Path(directory).expanduser()
    topdir = given.absolute()
    names = (*REQUIRED_FILES, PROJECTS_FILE, RBAC_FILE, SITE_PRESET)
    existing = [topdir / CONFIG_DIR / name for name in names if (topdir / CONFIG_DIR / name).exists()]
    if existing:
        raise fail(f"{existing[0]} exists already; not overwriting it (edit it, or choose another DIR)")
    if topdir.exists() and not topdir.is_dir():
        raise fail(f"{topdir} exists and is not a directory")
    try:
        problems = make_layout(topdir)  # D-7: config/ and run/ 0755, state/ 0700, jobs/ 0711
        if problems:
            raise fail("the directory lets other users change what xced will trust:\n  "
                       + "\n  ".join(str(p) for p in problems))
        written = write_skeleton(topdir)
        # commented out: a fresh TopDir is in open mode with no role bound (PRJ-4, RBAC-4)
        shown = {"topdir": _comment_safe(str(topdir))}
        written += _write(topdir, {PROJECTS_FILE: templates.SKELETON_PROJECTS.substitute(shown),
                                   RBAC_FILE: templates.SKELETON_RBAC.substitute(shown),
                                   SITE_PRESET: templates.SKELETON_PRESET}, False)
    except (FileExistsError, UnsafeDirectory) as e:
        raise fail(str(e)) from None
    except OSError as e:
        raise fail(f"cannot write the config of {topdir}: {e.strerror or e}") from None
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    typer.echo(f"next: edit the files, then: xceadmin build --topdir {shlex.quote(str(given))}", err=True)
