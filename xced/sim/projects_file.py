"""The projects file of `xceadmin sim run --projects FILE` (PRJ-6, PRJ-7, SIM-1).

The file is in projects.yaml's form and is compiled by the daemon's own compiler
(xced.config.projects), so a replay holds jobs to exactly the caps the daemon would. The
file may have any name: it is compiled as the `projects.yaml` of a directory of its own,
without rbac.yaml or hosts.yaml, and its problems are reported as FILE:LINE:COL. In the
simulator, SWF group G runs in project `/g<G>` and SWF user U as user `u<U>`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ProjectsFileError", "load_projects"]


class ProjectsFileError(ValueError):
    """A projects file that does not compile: its first error, as FILE:LINE:COL: error: MESSAGE,
    and how many more there are."""


def load_projects(path: str | Path):
    """The ProjectsConfig of the projects file at `path` (parents before children). Raises
    ProjectsFileError for a file that cannot be read or does not compile (what
    `xceadmin build` would refuse in it)."""
    import shutil
    import tempfile

    from xced.config.projects import PROJECTS_FILE
    from xced.config.projects import load_projects as compile_projects

    p = Path(path)
    errors: list = []
    with tempfile.TemporaryDirectory(prefix="xce-sim-projects-") as d:
        try:
            shutil.copyfile(p, Path(d) / PROJECTS_FILE)
        except OSError as e:
            raise ProjectsFileError(f"{p}: cannot read it: {e.strerror}") from None
        got = compile_projects(d, errors, [])
        copy = str(Path(d) / PROJECTS_FILE)
    if errors or got.projects is None:
        first = str(errors[0]).replace(copy, str(p)) if errors else f"{p}: does not compile"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ProjectsFileError(first + more)
    return got.projects
