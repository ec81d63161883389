"""`xceadmin init` and `xceadmin build` through the real console script (CLI-4, CFG-2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


XCEADMIN = str(Path(sys.executable).parent / "xceadmin")  # installed by `make test`; missing is a failure


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("XCE_")}
    base.update(env or {})
    return subprocess.run([XCEADMIN, *args], cwd=cwd, env=base, capture_output=True, text=True, timeout=60)


def test_init_then_build(tmp_path: Path) -> None:
    init = run("init", "site/top", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert init.stdout == ""
    assert "xce.yaml" in init.stderr and "xceadmin build --topdir site/top" in init.stderr
    build = run("build", "--topdir", "site/top", cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    assert re.fullmatch(r"config OK: 2 queues, 1 host, 1 server preset, hash [0-9a-f]{64}\n", build.stdout)
    assert "presets/site-default.yaml" in init.stderr  # PRE-3: an example server preset, valid as written
    # the skeleton shows every setting of xce.yaml the README documents, with its default
    skeleton = (tmp_path / "site/top/config/xce.yaml").read_text()
    for key in ("kill_interval", "limit_grace", "sched_delay", "max_array_size", "store_busy_timeout",
                "max_dispatch_failures", "launch_timeout", "presets_dir"):
        assert f"\n{key}: " in skeleton, key


def test_init_makes_a_topdir_that_keeps_users_apart(tmp_path: Path) -> None:
    """D-7: config and run/ readable by all, state/ the daemon user's alone, jobs/ reachable
    by name only; a directory others may write is refused with the fix."""
    import os
    import stat

    assert run("init", "top", cwd=tmp_path).returncode == 0
    top = tmp_path / "top"
    modes = {rel: stat.S_IMODE((top / rel).stat().st_mode) for rel in ("", "config", "run", "state", "jobs")}
    assert modes == {"": 0o755, "config": 0o755, "run": 0o755, "state": 0o700, "jobs": 0o711}
    loose = tmp_path / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    r = run("init", "loose", cwd=tmp_path)
    assert r.returncode == 1 and f"{loose}: mode 0777" in r.stderr and f"chmod 0755 {loose}" in r.stderr
    assert not (loose / "config" / "xce.yaml").exists()


def test_build_uses_xce_topdir(tmp_path: Path) -> None:
    assert run("init", "top", cwd=tmp_path).returncode == 0
    build = run("build", cwd=tmp_path, env={"XCE_TOPDIR": str(tmp_path / "top")})
    assert build.returncode == 0 and "hash" in build.stdout


def test_init_twice_refuses(tmp_path: Path) -> None:
    assert run("init", "top", cwd=tmp_path).returncode == 0
    again = run("init", "top", cwd=tmp_path)
    assert again.returncode == 1
    assert len(again.stderr.strip().splitlines()) == 1 and "exists already" in again.stderr


def test_broken_yaml(tmp_path: Path) -> None:
    assert run("init", "top", cwd=tmp_path).returncode == 0
    queues = tmp_path / "top" / "config" / "queues.yaml"
    queues.write_text("queues:\n  - name: normal\n    priority: high\n  - name: b\n    prio: 1\n")
    build = run("build", "--topdir", "top", cwd=tmp_path)
    assert build.returncode == 1
    assert build.stdout == ""
    assert "queues.yaml:3:15: error: " in build.stderr and "queues.yaml:5:5: error: " in build.stderr
    assert "Traceback" not in build.stderr

    queues.write_text("queues: [\n")
    build = run("build", "--topdir", "top", cwd=tmp_path)
    assert build.returncode == 1 and re.search(r"queues\.yaml:\d+:\d+: error: invalid YAML", build.stderr)
    assert "Traceback" not in build.stderr


def test_build_json(tmp_path: Path) -> None:
    assert run("init", "top", cwd=tmp_path).returncode == 0
    ok = run("build", "--topdir", "top", "--json", cwd=tmp_path)
    assert ok.returncode == 0
    body = json.loads(ok.stdout)
    assert body["ok"] is True and re.fullmatch(r"[0-9a-f]{64}", body["hash"])
    assert body["errors"] == [] and body["warnings"] == []

    (tmp_path / "top" / "config" / "hosts.yaml").write_text("hosts:\n  - name: h\n    slots: 0\n    memory: 1GB\n")
    bad = run("build", "--topdir", "top", "--json", cwd=tmp_path)
    assert bad.returncode == 1
    body = json.loads(bad.stdout)
    assert body["ok"] is False and body["hash"] is None and body["warnings"] == []
    (err,) = body["errors"]
    assert set(err) == {"severity", "file", "line", "col", "message"}
    assert err["severity"] == "error" and err["file"].endswith("hosts.yaml") and (err["line"], err["col"]) == (3, 12)


def test_nonexistent_topdir(tmp_path: Path) -> None:
    build = run("build", "--topdir", str(tmp_path / "nope"), cwd=tmp_path)
    assert build.returncode == 1
    assert len(build.stderr.strip().splitlines()) == 1 and "does not exist" in build.stderr
    assert "Traceback" not in build.stderr


def test_usage_error_is_2(tmp_path: Path) -> None:
    assert run("build", "--no-such-option", cwd=tmp_path).returncode == 2


def test_an_empty_topdir_is_a_usage_error_never_the_current_or_default_one(tmp_path: Path) -> None:
    """A script's unset variable (`xceadmin init "$DIR"`) must not make a TopDir in the current
    directory, nor `build --topdir ''` compile the personal cluster (issue 16, bad input)."""
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    init = run("init", "", cwd=tmp_path, env=env)
    assert init.returncode == 2 and "DIR is empty" in init.stderr, init.stderr
    assert list(tmp_path.iterdir()) == []
    for argv in (["build", "--topdir", ""], ["build", "--topdir", "  "], ["keys", "list", "--topdir", ""],
                 ["hosts", "hist", "--topdir", ""], ["debug", "clock", "--advance", "1s", "--topdir", ""],
                 ["sim", "record", "--stop", "--topdir", ""]):
        r = run(*argv, cwd=tmp_path, env=env)
        assert r.returncode == 2 and "the TopDir is empty" in r.stderr, (argv, r.stderr)
    assert list(tmp_path.iterdir()) == []
