"""Issue 16 part 5: `--version` of the three tools comes from one place, the package
metadata (pyproject.toml's version), whether asked first or after global options."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, cwd="/")


@pytest.mark.parametrize("prog", ["xcecli", "xceadmin", "xced"])
def test_each_tool_prints_the_package_version(prog):
    r = run(str(BIN / prog), "--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{prog} {VERSION}\n", "")
    m = run(sys.executable, "-m", prog, "--version")
    assert (m.returncode, m.stdout) == (0, f"{prog} {VERSION}\n")


@pytest.mark.parametrize("argv", [("xcecli", "--topdir", "/nonexistent", "--version"),
                                  ("xceadmin", "--key-host", "h1", "--version"),
                                  ("xced", "--roles", "worker", "--version")])
def test_version_after_global_options_goes_through_the_app(argv):
    """Not the fast path: the option declared on the Typer app answers, before any other
    option is acted on (no TopDir is made or checked)."""
    r = run(str(BIN / argv[0]), *argv[1:])
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{argv[0]} {VERSION}\n", "")
    assert not Path("/nonexistent").exists()


@pytest.mark.parametrize("prog", ["xcecli", "xceadmin"])
def test_version_is_in_the_help(prog):
    r = run(str(BIN / prog), "--help")
    assert r.returncode == 0 and "--version" in r.stdout


def test_the_fast_path_imports_neither_typer_nor_the_apps():
    """What really runs for `xcecli --version`: no command definitions, no importlib.metadata
    (their cost is what the bench's `version` figure keeps near `python -c pass`)."""
    code = ("import sys; sys.argv = ['xcecli', '--version']; from xcecli.__main__ import main; main(); "
            "print(sorted(m for m in ('typer', 'click', 'xcecli.app', 'importlib.metadata', 'pydantic') "
            "if m in sys.modules))")
    r = run(sys.executable, "-c", code)
    assert r.returncode == 0 and r.stdout == f"xcecli {VERSION}\n[]\n", r.stdout + r.stderr


def test_the_daemon_reports_the_same_version(shared_daemon):
    """GET /info (the API's own) gives the version the tools print."""
    import json

    r = shared_daemon.cli("api", "GET", "/info", check=True)
    assert json.loads(r.stdout)["version"] == VERSION
