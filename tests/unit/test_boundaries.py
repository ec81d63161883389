"""DESIGN rule 4: xcecli and xceadmin import from xced only the pure modules; rule 7 /
CLI-6: importing the CLI apps pulls in no heavy module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"api", "config", "model", "resreq", "policy", "auth", "sim", "constants", "version"}
FORBIDDEN = {"server", "store", "controller", "scheduler", "worker", "daemon"}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module


def test_cli_imports_only_pure_xced_modules():
    bad = []
    for pkg in ("xcecli", "xceadmin"):
        for f in (ROOT / pkg).rglob("*.py"):
            for line, mod in _imports(f):
                parts = mod.split(".")
                if parts[0] == "xced" and len(parts) > 1 and parts[1] not in ALLOWED:
                    bad.append(f"{f.relative_to(ROOT)}:{line}: imports {mod}")
    assert not bad, "\n".join(bad)


def test_pure_modules_do_not_import_daemon_internals():
    bad = []
    for sub in ("api", "config", "model", "policy"):
        for f in (ROOT / "xced" / sub).rglob("*.py"):
            for line, mod in _imports(f):
                parts = mod.split(".")
                if parts[0] == "xced" and len(parts) > 1 and parts[1] in FORBIDDEN:
                    bad.append(f"{f.relative_to(ROOT)}:{line}: imports {mod}")
    assert not bad, "\n".join(bad)


def test_scheduler_does_not_import_store_or_controller():
    for f in (ROOT / "xced" / "scheduler").rglob("*.py"):
        for line, mod in _imports(f):
            assert not mod.startswith(("xced.store", "xced.controller", "xced.server", "xced.worker")), f"{f}:{line}"


def test_cli_startup_imports_no_heavy_modules():
    code = ("import sys, xcecli.app, xceadmin.app; "
            "heavy = [m for m in ('httpx', 'pydantic', 'fastapi', 'uvicorn', 'ruamel', 'rich.console', 'psutil') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def _bad_edges(sub: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in (ROOT / "xced" / sub).rglob("*.py"):
        for line, mod in _imports(f):
            if mod.startswith(forbidden):
                bad.append(f"{f.relative_to(ROOT)}:{line}: imports {mod}")
    return bad


def test_no_back_edges_into_the_worker_or_the_simulator():
    """DESIGN rule 3 and the layout: the controller reaches workers only through their links
    (the in-process one and the channel's) and never builds their environments; recordings
    are the simulator's, opened by the server; the server reaches workers through the
    controller."""
    assert _bad_edges("controller", ("xced.sim", "xced.worker")) == []
    assert _bad_edges("server", ("xced.worker",)) == []
