"""The product's version, read from one place: the installed package's metadata
(pyproject.toml's `version`, written into the distribution's METADATA at install).

`version()` reads the `Version:` field of the `xce-*.dist-info/METADATA` file on sys.path
itself rather than through `importlib.metadata`, whose import and distribution scan cost
about 30 ms here: `xcecli --version` must cost no more than `python -c pass` plus 20 ms
(issue 16, measured in bench/run.py `version`). Like `sbatch --version` ("slurm 22.05.8"),
the tools print their name and this version.
"""

from __future__ import annotations

import os
import sys

#: the distribution's name in pyproject.toml
DIST = "xce"
#: what `version()` gives when no installed metadata can be found (a bare source tree)
UNKNOWN = "0+unknown"

_cache: list[str] = []


def _from_dist_info() -> str | None:
    """The Version field of the first `xce-VERSION.dist-info/METADATA` on sys.path, or None."""
    prefix = DIST + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not (name.startswith(prefix) and name.endswith(".dist-info")):
                continue
            try:
                with open(os.path.join(entry or ".", name, "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():  # the headers end at the first blank line
                            break
            except OSError:
                continue
    return None


def version() -> str:
    """The installed version string, e.g. "0.1.0"; UNKNOWN ("0+unknown") when the package
    is not installed. Falls back to importlib.metadata for layouts with no dist-info
    directory on sys.path (an egg, a zip). Never raises."""
    if not _cache:
        v = _from_dist_info()
        if v is None:
            try:
                from importlib.metadata import PackageNotFoundError
                from importlib.metadata import version as _md_version

                try:
                    v = _md_version(DIST)
                except PackageNotFoundError:
                    v = UNKNOWN
            except Exception:  # pragma: no cover - a broken metadata store
                v = UNKNOWN
        _cache.append(v)
    return _cache[0]


def version_line(prog: str) -> str:
    """What `PROG --version` prints: "PROG VERSION", e.g. "xcecli 0.1.0"."""
    return f"{prog} {version()}"


def print_version_and_exit(prog: str):
    """A click/Typer option callback for `--version` (is_eager): given the option's value,
    print `version_line(prog)` and end the process with status 0 when it is set."""
    def callback(value: bool) -> None:
        if value:
            print(version_line(prog))
            raise SystemExit(0)
    return callback
