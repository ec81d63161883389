"""The TopDir on disk (D-7): where the socket goes for a long TopDir and how clients of any
user find it, the fallback directory's checks, and the modes of a new TopDir."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from xced.api import errors
from xced.api.client import Client
from xced.config.topdir import (
    UnsafeDirectory,
    check_ancestors,
    check_config_files,
    check_socket_parent,
    check_store_file,
    daemon_socket_path,
    fallback_socket_dir,
    make_layout,
    private_socket_dir,
    write_socket_path_file,
)
from xced.constants import socket_path


def _long(tmp_path: Path) -> Path:
    top = tmp_path / ("x" * 50) / ("y" * 50)
    assert len(str(top / "run" / "xced.sock")) > 107
    return top


def test_a_short_topdir_keeps_its_socket_in_run(tmp_path):
    top = tmp_path / "t"
    assert daemon_socket_path(top) == top / "run" / "xced.sock"
    assert socket_path(top) == top / "run" / "xced.sock"  # what clients look for


def test_a_long_topdir_puts_its_socket_in_the_daemon_users_own_dir(tmp_path, monkeypatch):
    tmp = Path("/tmp/xce-tmpdir-test")  # a short TMPDIR (nothing is made in it here)
    monkeypatch.setenv("TMPDIR", str(tmp))
    top = _long(tmp_path)
    digest = hashlib.sha256(os.fsencode(str(top))).hexdigest()[:16]
    sock = daemon_socket_path(top)
    assert sock == tmp / f"xce-{os.geteuid()}" / f"xced-{digest}.sock"
    assert len(os.fsencode(str(sock))) <= 107
    assert fallback_socket_dir(1234) == tmp / "xce-1234"
    monkeypatch.setenv("TMPDIR", "/" + "z" * 90)  # too long to hold a socket name: /tmp
    assert daemon_socket_path(top).parent == Path(f"/tmp/xce-{os.geteuid()}")


def test_clients_read_the_recorded_path_never_their_own_uid(tmp_path, monkeypatch):
    """Clients of another uid find the daemon's socket through run/xced.sock.path."""
    top = _long(tmp_path)
    (top / "run").mkdir(parents=True)
    elsewhere = tmp_path / "xce-0" / "xced-abc.sock"
    write_socket_path_file(top, elsewhere)
    rec = top / "run" / "xced.sock.path"
    assert rec.read_text() == f"{elsewhere}\n" and stat.S_IMODE(rec.stat().st_mode) == 0o644
    assert socket_path(top) == elsewhere
    monkeypatch.delenv("XCE_SOCKET", raising=False)
    monkeypatch.setenv("XCE_TOPDIR", str(top))
    assert Client.connect().socket == str(elsewhere)
    write_socket_path_file(top, top / "run" / "xced.sock")  # back in run/: the record goes
    assert not rec.exists()


def test_a_long_socket_path_without_a_record_says_so(tmp_path):
    top = _long(tmp_path)
    top.mkdir(parents=True)
    with Client.connect(topdir=str(top)) as c, pytest.raises(errors.DaemonUnreachable) as ei:
        c.info()
    assert "longer than the 107 bytes" in ei.value.message and "xced.sock.path" in ei.value.message


def test_the_fallback_dir_is_made_0711_and_checked(tmp_path):
    d = tmp_path / "xce-me"
    private_socket_dir(d)
    st = d.lstat()
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o711 and st.st_uid == os.geteuid()
    private_socket_dir(d)  # ours: accepted again
    os.chmod(d, 0o700)
    private_socket_dir(d)
    os.chmod(d, 0o777)
    with pytest.raises(UnsafeDirectory, match="mode 0777 lets others change it"):
        private_socket_dir(d)
    os.chmod(d, 0o755)
    with pytest.raises(UnsafeDirectory, match="mode 0755 lets others list it"):
        private_socket_dir(d)
    os.rmdir(d)
    (tmp_path / "real").mkdir(mode=0o700)
    d.symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeDirectory, match="symbolic link"):
        private_socket_dir(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_a_fallback_dir_of_another_user_is_refused(tmp_path):
    d = tmp_path / "xce-0"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    with pytest.raises(UnsafeDirectory, match="it belongs to"):
        private_socket_dir(d)


def test_a_new_topdir_has_the_modes_that_keep_users_apart(tmp_path):
    old = os.umask(0o022)
    try:
        top = tmp_path / "new" / "top"
        assert make_layout(top) == []
    finally:
        os.umask(old)
    modes = {rel: stat.S_IMODE((top / rel).stat().st_mode) for rel in ("", "config", "run", "state", "jobs", "keys")}
    assert modes == {"": 0o755, "config": 0o755, "run": 0o755, "state": 0o700, "jobs": 0o711, "keys": 0o711}


def test_loose_modes_are_named_with_the_fix(tmp_path):
    top = tmp_path / "top"
    make_layout(top)
    os.chmod(top / "state", 0o777)
    (top / "state" / "xce.db").write_text("")
    os.chmod(top / "state" / "xce.db", 0o646)
    problems = [str(p) for p in make_layout(top) + check_store_file(top)]
    assert len(problems) == 2
    assert problems[0].startswith(f"{top / 'state'}: mode 0777") and f"chmod 0700 {top / 'state'}" in problems[0]
    assert problems[1].startswith(f"{top / 'state' / 'xce.db'}: mode 0646") and "needs mode 0600" in problems[1]


def test_an_explicit_socket_must_not_sit_where_others_may_write(tmp_path):
    """XCE_SOCKET in /tmp (sticky, world-writable) is refused: while the daemon is down anyone
    may bind that name and catch its clients; a directory of the daemon's user is fine."""
    with pytest.raises(UnsafeDirectory, match="lets other users put a socket of their own there"):
        check_socket_parent(Path("/tmp/xced-test.sock"))
    mine = tmp_path / "sockets"
    mine.mkdir(mode=0o755)
    check_socket_parent(mine / "xced.sock")
    with pytest.raises(UnsafeDirectory, match="does not exist"):
        check_socket_parent(tmp_path / "nowhere" / "xced.sock")


def test_a_topdir_under_a_directory_others_may_write_is_named(tmp_path):
    """sshd's StrictModes rule: a 0777 (non-sticky) directory above the TopDir lets another
    user move it away and put their own in its place; a sticky one like /tmp does not."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    problems = [str(p) for p in check_ancestors(shared / "top")]
    assert len(problems) == 1 and problems[0].startswith(f"{shared}: mode 0777") and f"chmod 0755 {shared}" in problems[0]
    os.chmod(shared, 0o1777)
    assert check_ancestors(shared / "top") == []


def test_config_files_others_may_write_are_named(tmp_path):
    top = tmp_path / "top"
    make_layout(top)
    (top / "config" / "xce.yaml").write_text("cluster_name: x\n")
    os.chmod(top / "config" / "xce.yaml", 0o666)
    (top / "config" / "queues.yaml").write_text("queues: []\n")
    os.chmod(top / "config" / "queues.yaml", 0o644)
    problems = [str(p) for p in check_config_files(top)]
    assert len(problems) == 1 and problems[0].startswith(f"{top / 'config' / 'xce.yaml'}: mode 0666")
    assert f"chmod 0644 {top / 'config' / 'xce.yaml'}" in problems[0]
