"""How `xceadmin` reaches the cluster (issue 14 "Local or live", KEY-3, CLI-4): one client
object, two paths.

- **Local** (the default, as before): the controller's Unix socket, through
  `xced.api.client.Client`. The caller is identified by SO_PEERCRED (a cluster admin is one
  named in xce.yaml); nothing is signed.
- **Remote**: the controller's TCP port, TLS pinned to the controller's host key (KEY-6),
  each session signed with xceadmin's admin key in the `admin` role
  (`xceadmin.signed.AdminClient`). The controller then treats the caller as the cluster
  admin `admin-key@HOST` (KEY-3's allowlist of the admin role: never a submit).

Which path (`remote_target`), first match wins:

1. `xceadmin --controller tcp://HOST:PORT` on the command line: remote. It needs the pin,
   `--controller-key FILE|SHA256:...` or XCE_CONTROLLER_KEY. A command's `--topdir` that
   names the controller's own TopDir (keys, debug, sim record) cannot be given with it: that
   is the local path.
2. A command's `--topdir DIR` (naming the daemon): local, whatever the environment says.
3. XCE_CONTROLLER with XCE_CONTROLLER_KEY, and no XCE_SOCKET (the same precedence as
   `Client.connect`): remote.
4. Otherwise local: `Client.connect` (XCE_SOCKET, XCE_CONTROLLER alone as today, i.e. inside
   a job of a worker host, XCE_TOPDIR, the default TopDir).

The host the admin key signs as is `--key-host NAME`, else this machine's short host name
(`default_key_host`); it must be the host the key was trusted for (`keys trust --host`).

Errors: typer.BadParameter (a usage error, exit 2) for options that do not fit together or
a pin that is neither a fingerprint nor a public key file; the rest as
`xceadmin.signed.AdminClient` raises them. Nothing here imports httpx (DESIGN rule 7).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

import typer

from xced.constants import ENV_CONTROLLER, ENV_CONTROLLER_KEY, ENV_SOCKET
from xced.model.units import HOST_FORM
from xced.model.units import HOST_PATTERN as _HOST_RULE

__all__ = ["Options", "Remote", "connect", "default_key_host", "key_host", "remote_target", "set_options"]

#: a host name as the trusted list takes it: the one rule, xced.model.units.HOST_PATTERN
HOST_PATTERN = re.compile(_HOST_RULE)



def nonblank_topdir(value: str | None) -> str | None:
    """The callback of every xceadmin `--topdir`: an empty or blank DIR (a script's unset
    variable) is a usage error (exit 2), never the default TopDir, as `xcecli --topdir ''`
    and `xced --topdir ''` refuse it too."""
    if value is not None and not value.strip():
        raise typer.BadParameter("the TopDir is empty; give a directory, e.g. --topdir /srv/xce",
                                 param_hint="'--topdir'")
    return value

@dataclass(frozen=True)
class Options:
    """xceadmin's global options (the root callback sets them): `controller`
    (tcp://HOST:PORT), `controller_key` (a public key file or SHA256:...), `key_host`;
    None where not given."""

    controller: str | None = None
    controller_key: str | None = None
    key_host: str | None = None


@dataclass(frozen=True)
class Remote:
    """A controller reached over TCP: `url` tcp://HOST:PORT, `pin` its fingerprint
    (SHA256:...), `key_host` the host the admin key signs as, `source` where the URL came
    from (`--controller` or XCE_CONTROLLER, for messages)."""

    url: str
    pin: str
    key_host: str
    source: str


_options = Options()


def set_options(controller: str | None = None, controller_key: str | None = None,
                key_host: str | None = None) -> None:
    """Record the global options of this run (`xceadmin --controller ... --controller-key ...
    --key-host ...`). Raises typer.BadParameter for a --key-host that is not a host name."""
    global _options
    if key_host is not None and not HOST_PATTERN.fullmatch(key_host):
        raise typer.BadParameter(f"--key-host {key_host[:80]!r}: {HOST_FORM}")
    _options = Options(controller, controller_key, key_host)


def options() -> Options:
    """The global options of this run (all None before `set_options`)."""
    return _options


def default_key_host() -> str:
    """This machine's short host name (up to the first dot), the host an admin key signs as
    by default; `admin-host` when the name is not one the trusted list takes."""
    host = socket.gethostname().split(".")[0]
    return host if HOST_PATTERN.fullmatch(host or "") else "admin-host"


def key_host() -> str:
    """The host the admin key is trusted for and signs as: --key-host, else `default_key_host()`."""
    return _options.key_host or default_key_host()


def remote_target(topdir: str | None = None, *, topdir_names_daemon: bool = True) -> Remote | None:
    """The remote controller this command goes to, or None for the local path (the rule is
    the module docstring's). `topdir` is the command's --topdir; `topdir_names_daemon` is
    False where it names only files to read (`build --apply`). Raises typer.BadParameter:
    --controller without a pin, --controller-key without a controller, --controller with a
    --topdir naming the daemon, a pin that is neither a fingerprint nor a key file."""
    o = _options
    if o.controller is not None:
        if topdir is not None and topdir_names_daemon:
            raise typer.BadParameter(f"--topdir {topdir} names the controller's own TopDir (its Unix socket, on its "
                                     f"host), --controller {o.controller} reaches it over TCP from another host: give "
                                     f"one of them")
        url, source = o.controller, "--controller"
    elif o.controller_key is not None:
        env = os.environ.get(ENV_CONTROLLER)
        if not env or os.environ.get(ENV_SOCKET) or (topdir is not None and topdir_names_daemon):
            raise typer.BadParameter("--controller-key pins the controller that --controller tcp://HOST:PORT (or "
                                     f"{ENV_CONTROLLER}) names; give that too")
        url, source = env, ENV_CONTROLLER
    else:
        env = os.environ.get(ENV_CONTROLLER)
        if (not env or not os.environ.get(ENV_CONTROLLER_KEY) or os.environ.get(ENV_SOCKET)
                or (topdir is not None and topdir_names_daemon)):
            return None
        url, source = env, ENV_CONTROLLER
    url = url.strip()
    if not re.fullmatch(r"tcp://([^:/\s\[\]]+|\[[0-9a-fA-F:]+\]):([0-9]{1,5})", url) \
            or not 1 <= int(url.rpartition(":")[2]) <= 65535:
        raise typer.BadParameter(f"{source} {url[:80]!r}: expected tcp://HOST:PORT with a port from 1 to 65535 (the "
                                 f"controller's listen port, or its run/xced.port)")
    pin_text, pin_source = ((o.controller_key, "--controller-key") if o.controller_key is not None
                            else (os.environ.get(ENV_CONTROLLER_KEY), ENV_CONTROLLER_KEY))
    if not pin_text or not pin_text.strip():
        raise typer.BadParameter(f"{source} {url}: give --controller-key FILE|SHA256:... too (or "
                                 f"{ENV_CONTROLLER_KEY}): the controller's keys/host.pub, or its fingerprint as "
                                 f"`xceadmin keys list` shows it; xceadmin trusts the controller only by its key")
    from xced.auth.keys import KeyProblem
    from xced.auth.tls import parse_pin

    try:
        pin = parse_pin(pin_text, pin_source)
    except KeyProblem as e:
        raise typer.BadParameter(str(e)) from None
    return Remote(url, pin, key_host(), source)


def connect(topdir: str | None = None, *, topdir_names_daemon: bool = True, timeout: float = 60.0):
    """The client of this command, with the interface of `xced.api.client.Client`
    (`request(method, path, json=..., params=...)` returning a Response with `.status` and
    `.json()`, the API methods, a context manager), on the path `remote_target` picks: an
    `xceadmin.signed.AdminClient` signing with the admin key, or `Client.connect(topdir=...)`.
    Raises as `remote_target` and `Client.connect`."""
    remote = remote_target(topdir, topdir_names_daemon=topdir_names_daemon)
    if remote is None:
        from xced.api.client import Client

        return Client.connect(topdir=topdir, timeout=timeout)
    from xceadmin.signed import AdminClient

    return AdminClient(remote.url, remote.pin, remote.key_host, timeout=timeout)
