"""`xceadmin keys` (KEY-2, KEY-5, CLI-4): the host keys of XCE.

- `keys gen` makes this xced's Ed25519 key pair in its TopDir (`<TopDir>/keys/host.key`,
  0600, never printed; `host.pub` beside it) and prints the public key and its fingerprint.
  It is local: no daemon is asked.
- `keys trust`, `revoke`, `list` and `token` change or read the controller's trusted list
  (config/keys.yaml, and the revocations in its store) through its Unix socket, as a
  cluster admin (SO_PEERCRED). Signing them with an admin key from another host comes with
  the keyed join (issue 14).
"""

from __future__ import annotations

import re
from typing import List, Optional

import typer

app = typer.Typer(no_args_is_help=True, help="Host keys: each xced has its own Ed25519 key pair; only public keys move.")



@app.command("gen")
def gen(
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR",
                                         help="the TopDir of the xced the key is for (default: XCE_TOPDIR, else "
                                              "the personal cluster's)"),
    force: bool = typer.Option(False, "--force", help="replace an existing key pair (the old one is then no longer "
                                                      "this host's: trust the new public key)"),
    admin: bool = typer.Option(False, "--admin", help="make xceadmin's own key instead (the admin role), kept in the "
                                                      "OS keyring or a 0600 file, and trust it on the controller"),
    as_json: bool = typer.Option(False, "--json", help="print {fingerprint, public_key, private_key_file, "
                                                       "public_key_file}"),
) -> None:
    """Make this xced's key pair: TopDir/keys/host.key (0600, never printed) and host.pub.
    Prints the public key line on stdout (give it to `xceadmin keys trust` on the controller).
    With --admin: xceadmin's own key, kept in the OS keyring (or a 0600 file where none works)
    and trusted with the admin role by the controller of the TopDir, which must see you as
    an admin (named in xce.yaml)."""
    import json
    import os
    import socket

    if admin:
        _gen_admin(topdir, force, as_json)
        return

    from xced.auth.keys import KEYS_DIR, fingerprint, generate, write_key_pair
    from xced.constants import resolve_topdir

    top = resolve_topdir(topdir)
    if not top.is_dir():
        raise typer.BadParameter(f"TopDir {top} does not exist; give --topdir DIR of the xced this key is for "
                                 f"(`xceadmin init DIR` makes one)")
    kdir = top / KEYS_DIR
    key = generate()
    try:
        priv, pub_path, line = write_key_pair(kdir, key, socket.gethostname(), overwrite=force)
        if os.stat(kdir).st_mode & 0o077:
            os.chmod(kdir, 0o700)
    except FileExistsError as e:
        from xced.api.errors import Conflict

        raise Conflict(str(e)) from None
    except OSError as e:
        from xced.api.errors import InvalidRequest

        raise InvalidRequest(f"cannot write the key pair in {kdir}: {e.strerror or e}") from None
    fp = fingerprint(key.public_key())
    if as_json:
        print(json.dumps({"fingerprint": fp, "public_key": line, "private_key_file": str(priv),
                          "public_key_file": str(pub_path)}, indent=2))
        return
    print(line)
    typer.echo(f"wrote {priv} (0600) and {pub_path}; fingerprint {fp}", err=True)


def _client(topdir: str | None):
    from xced.api.client import Client

    return Client.connect(topdir=topdir)


_DURATION = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


def parse_duration(text: str, what: str) -> float:
    """A duration as 90d, 12h, 30m, 3600s, 2w or 1d12h, in seconds (more than 0). Raises
    typer.BadParameter naming `what` (the option) and the forms."""
    m = _DURATION.fullmatch(text.strip().lower())
    forms = "a duration such as 90d, 12h, 30m, 3600s, 2w or 1d12h"
    if not text.strip() or m is None or not any(m.groups()):
        raise typer.BadParameter(f"{what} {text!r}: expected {forms}")
    w, d, h, mi, se = (int(g or 0) for g in m.groups())
    seconds = (((w * 7 + d) * 24 + h) * 60 + mi) * 60 + se
    if seconds <= 0:
        raise typer.BadParameter(f"{what} {text!r}: the duration must be more than 0 ({forms})")
    return float(seconds)


def _expiry(text: str | None, what: str = "--expires") -> dict:
    """--expires as the trust request takes it: {"expires": None} for "never" (or none given),
    {"expires_in_s": S} for a duration (counted on the daemon's clock), {"expires": T} for a
    UTC time. Raises typer.BadParameter (a time in the past too, by this machine's clock)."""
    import time

    from xced.config.keys import parse_time

    if text is None or text.strip().lower() == "never":
        return {"expires": None}
    t = text.strip()
    if "T" in t or t.count("-") >= 2:
        try:
            at = parse_time(t)
        except (ValueError, OverflowError):
            raise typer.BadParameter(f"{what} {text!r}: not a UTC time such as 2027-03-01T12:00:00Z") from None
        if at <= time.time():
            raise typer.BadParameter(f"{what} {text}: that time is in the past; give a time to come, or a duration "
                                     f"such as 90d")
        return {"expires": at}
    return {"expires_in_s": parse_duration(t, what)}


def _host(host: str) -> str:
    if not _HOST.fullmatch(host):
        raise typer.BadParameter(f"--host {host[:80]!r}: a host name is a letter or digit, then letters, digits, "
                                 f"'_', '.' and '-' (at most 255)")
    return host


def _when(t: float | None) -> str:
    from xced.config.keys import format_time

    return format_time(t) or "never"


_TOPDIR = typer.Option(None, "--topdir", metavar="DIR", help="the controller's TopDir (default: XCE_TOPDIR, else the "
                                                             "personal cluster's)")


@app.command("trust")
def trust(
    pubkey_file: str = typer.Argument(..., metavar="PUBKEY-FILE", help="the host's public key (its keys/host.pub), "
                                                                       "or - for stdin"),
    host: str = typer.Option(..., "--host", help="the host the key belongs to"),
    role: List[str] = typer.Option(..., "--role", help="worker, scheduler, apiserver or admin (repeatable)"),
    expires: Optional[str] = typer.Option(None, "--expires", help="90d, 12h, a UTC time (2027-03-01T12:00:00Z), or "
                                                                  "never (the default)"),
    comment: str = typer.Option("", "--comment", help="free text kept with the key"),
    unrevoke: bool = typer.Option(False, "--unrevoke", help="trust a revoked key again (logged)"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Trust a host's public key for roles (KEY-2): written to the controller's keys.yaml and
    in force at once. A revoked key needs --unrevoke."""
    import json
    import sys

    from xced.model.keys import ROLES

    _host(host)
    bad = [r for r in role if r not in ROLES]
    if bad:
        raise typer.BadParameter(f"--role {', '.join(bad)}: a key is trusted for one or more roles of "
                                 f"{', '.join(ROLES)}")
    if len(comment) > 1024:
        raise typer.BadParameter(f"--comment: {len(comment)} characters, more than the 1024 kept with a key")
    if pubkey_file == "-":
        text = sys.stdin.read(16385)
    else:
        try:
            with open(pubkey_file, encoding="utf-8", errors="replace") as f:
                text = f.read(16385)
        except OSError as e:
            raise typer.BadParameter(f"cannot read {pubkey_file}: {e.strerror or e}") from None
    if len(text) > 16384:
        raise typer.BadParameter(f"{pubkey_file} is larger than a public key file (16 KiB); give the host's "
                                 f"keys/host.pub")
    from xced.auth.keys import KeyProblem, parse_public_key

    try:  # here first: the message names the file (a usage error, exit 2, as any bad argument)
        parse_public_key(text, pubkey_file if pubkey_file != "-" else "<stdin>")
    except KeyProblem as e:
        raise typer.BadParameter(str(e).encode("ascii", "backslashreplace").decode()) from None
    with _client(topdir) as c:
        out = c.request("POST", "/keys/trust", json={"public_key": text, "host": host, "roles": list(role),
                                                      "comment": comment, "unrevoke": unrevoke,
                                                      **_expiry(expires)}).json()
    if as_json:
        print(json.dumps(out, indent=2))
        return
    old = out.get("replaced")
    if old is not None:
        typer.echo(f"{out['fingerprint']} was trusted already, for host {old['host']} as {', '.join(old['roles'])}, "
                   f"expires {_when(old['expires'])}: replaced", err=True)
    typer.echo(f"trusted {out['fingerprint']} for host {out['host']} as {', '.join(out['roles'])}, expires "
               f"{_when(out['expires'])}", err=True)


@app.command("revoke")
def revoke(
    fingerprint: str = typer.Argument(..., metavar="FINGERPRINT", help="SHA256:..., or a prefix only one key has"),
    reason: Optional[str] = typer.Option(None, "--reason", help="why, kept with the revocation"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Revoke a key (KEY-4): recorded in the controller's store, where it outlives any edit of
    keys.yaml; returns once every channel authenticated with it is closed."""
    import json

    if len(fingerprint) > 128 or not fingerprint.strip():
        raise typer.BadParameter(f"{fingerprint[:60]!r}: a fingerprint is SHA256: and 43 characters, or a start of "
                                 f"it (xceadmin keys list shows them)")
    if reason is not None and len(reason) > 1024:
        raise typer.BadParameter(f"--reason: {len(reason)} characters, more than the 1024 kept")
    with _client(topdir) as c:
        out = c.request("POST", "/keys/revoke", json={"fingerprint": fingerprint, "reason": reason}).json()
    if as_json:
        print(json.dumps(out, indent=2))
        return
    closed = f"; {out['closed']} channel{'s' if out['closed'] != 1 else ''} closed"
    host = f" (host {out['host']})" if out["host"] else ""
    if out.get("already"):
        typer.echo(f"{out['fingerprint']}{host} was revoked already, {_when(out['already']['time'])} by "
                   f"{out['already']['actor']}{closed}", err=True)
        return
    typer.echo(f"revoked {out['fingerprint']}{host}{closed}", err=True)


@app.command("list")
def list_(topdir: Optional[str] = _TOPDIR, as_json: bool = typer.Option(False, "--json")) -> None:
    """Every trusted key, and every revoked one: host, roles, fingerprint, expiry, revoked, last seen."""
    import json

    with _client(topdir) as c:
        body = c.request("GET", "/keys").json()
    if as_json:
        print(json.dumps(body, indent=2))
        return
    from xcecli.output import table

    rows = []
    for k in body["keys"]:
        state = ("revoked " + _when(k["revoked"]["time"])) if k["revoked"] else ("expired" if k["expired"] else "ok")
        rows.append([k["fingerprint"], k["host"] or "-", ",".join(k["roles"]) or "-", _when(k["expires"]), state,
                     _when(k["last_seen"]) if k["last_seen"] else "never"])
    table(["FINGERPRINT", "HOST", "ROLES", "EXPIRES", "STATE", "LAST_SEEN"], rows)


@app.command("token")
def token(
    role: List[str] = typer.Option(..., "--role", help="the role the enrolled host gets: worker, scheduler or "
                                                        "apiserver (one)"),
    host: Optional[str] = typer.Option(None, "--host", help="bind the token to this host name"),
    expires: str = typer.Option("1h", "--expires", help="how long it is valid: 1h, 30m, 2d (at most 7 days)"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Print a one-time enrolment token (KEY-5) for a new host; the controller keeps only its digest."""
    import json

    if len(role) != 1:
        raise typer.BadParameter(f"--role given {len(role)} times: a token is for one role (worker, scheduler or "
                                 f"apiserver)")
    if host is not None:
        _host(host)
    life = parse_duration(expires, "--expires")
    if life > 7 * 86400:
        raise typer.BadParameter(f"--expires {expires}: a token lives at most 7 days (7d)")
    with _client(topdir) as c:
        out = c.request("POST", "/keys/token", json={"role": role[0], "host": host, "expires_s": life}).json()
    if as_json:
        print(json.dumps(out, indent=2))
        return
    print(out["token"])
    typer.echo(f"one-time enrolment token for {out['role']}" + (f" on host {out['host']}" if out["host"] else "")
               + f", valid until {_when(out['expires'])}", err=True)


@app.command("enroll")
def enroll(
    token: str = typer.Argument(..., metavar="TOKEN", help="the one-time token of `xceadmin keys token`"),
    controller: str = typer.Option(..., "--controller", metavar="tcp://HOST:PORT",
                                   help="the controller (its run/xced.port)"),
    role: str = typer.Option("worker", "--role", help="the role the token is for: worker, scheduler or apiserver"),
    host: Optional[str] = typer.Option(None, "--host", help="this host's name as the token and the cluster know it "
                                                            "(default: this machine's name)"),
    controller_key: Optional[str] = typer.Option(None, "--controller-key", metavar="FILE|SHA256:...",
                                                 help="the controller's key, when the token carries none"),
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR",
                                         help="the TopDir of the xced being enrolled (default: XCE_TOPDIR)"),
    as_json: bool = typer.Option(False, "--json", help="print the trusted entry as `keys list --json` shows it"),
) -> None:
    """Enrol this host (KEY-5) without starting xced: make its key pair in TopDir/keys if it
    has none, trade the token for trust of it over TLS pinned to the controller's key (the
    token carries its fingerprint), and keep the pin in TopDir/keys/controller. Then start
    `xced --roles worker` (or `--roles apiserver`) with no --enroll. For a login host, whose
    token is made with --role apiserver."""
    import asyncio
    import json
    import socket

    from xced.api.errors import InvalidRequest
    from xced.api.peer_client import PeerClient, parse_controller_url
    from xced.auth.keys import KeyProblem, fingerprint, host_key, public_line, token_pin
    from xced.auth.tls import parse_pin, save_pin
    from xced.constants import resolve_topdir

    if role not in ("worker", "scheduler", "apiserver"):
        raise typer.BadParameter(f"--role {role!r}: a host enrols as worker, scheduler or apiserver")
    try:
        parse_controller_url(controller)
        carried = token_pin(token)
        pin = parse_pin(controller_key) if controller_key else carried
    except (ValueError, KeyProblem) as e:
        raise typer.BadParameter(str(e)) from None
    if pin is None:
        raise typer.BadParameter("the token carries no controller key (its controller has none: test mode?); give "
                                 "--controller-key")
    if carried is not None and carried != pin:
        raise typer.BadParameter(f"the token is for the controller with key {carried}, not --controller-key {pin}")
    name = _host(host or socket.gethostname())
    top = resolve_topdir(topdir)
    if not top.is_dir():
        raise typer.BadParameter(f"TopDir {top} does not exist; give --topdir DIR of the xced being enrolled")
    try:
        key, made = host_key(top, f"xced {role} {name}")
    except (KeyProblem, OSError) as e:
        raise InvalidRequest(f"the host key of {top}: {e}") from None

    async def go() -> dict:
        from xced.api.errors import PermissionDenied
        from xced.auth.tls import PinMismatch

        pc = PeerClient(controller, pin, key, name, role)
        try:
            return await pc.enroll(token.strip(), public_line(key.public_key(), f"xced {role} {name}"))
        except PinMismatch as e:
            raise PermissionDenied(str(e)) from None
        finally:
            await pc.close()

    out = asyncio.run(go())
    save_pin(top, pin)
    if as_json:
        print(json.dumps(out, indent=2))
        return
    typer.echo(f"{'made' if made else 'kept'} {top / 'keys' / 'host.key'} ({fingerprint(key.public_key())}); "
               f"trusted as {', '.join(out['roles'])} for host {out['host']}; the controller's key {pin} is pinned "
               f"in {top / 'keys' / 'controller'}", err=True)


def _gen_admin(topdir: str | None, force: bool, as_json: bool) -> None:
    """`keys gen --admin` (KEY-3): the admin key, stored, then trusted on the controller."""
    import json
    import re
    import socket

    from xced.api.errors import Conflict, InvalidRequest
    from xced.auth.admin_key import load_admin_key, store_admin_key
    from xced.auth.keys import KeyProblem, fingerprint, generate, public_line

    with _client(topdir) as c:
        info = c.request("GET", "/info").json()
        if not info.get("is_admin"):
            from xced.api.errors import PermissionDenied

            raise PermissionDenied(f"user {info.get('user')} is not a cluster admin of {info.get('cluster_name')}; "
                                   f"the first admin key is made by an admin named in xce.yaml, on the controller's "
                                   f"host")
        cluster = info["cluster_name"]
        try:
            old = load_admin_key(cluster)
        except KeyProblem:
            old = True
        if old is not None and not force:
            raise Conflict(f"an admin key of cluster {cluster} exists already; give --force to make a new one (and "
                           f"`xceadmin keys revoke` the old one)")
        key = generate()
        host = socket.gethostname().split(".")[0]
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", host or ""):
            host = "admin-host"
        pub = public_line(key.public_key(), f"xceadmin {info.get('user')}@{host}")
        out = c.request("POST", "/keys/trust", json={"public_key": pub, "host": host, "roles": ["admin"],
                                                      "expires": None,
                                                      "comment": f"xceadmin {info.get('user')}@{host}"}).json()
        try:
            where, why = store_admin_key(cluster, key)
        except OSError as e:
            c.request("POST", "/keys/revoke", json={"fingerprint": out["fingerprint"],
                                                     "reason": "its private key could not be stored"})
            raise InvalidRequest(f"could not keep the admin key (no keyring, and the file: {e.strerror or e}); it "
                                 f"was trusted and is revoked again") from None
    fp = fingerprint(key.public_key())
    if as_json:
        print(json.dumps({"fingerprint": fp, "public_key": pub, "stored": where, "keyring_error": why,
                          "cluster": cluster}, indent=2))
        return
    print(pub)
    if why is not None:
        typer.echo(f"warning: no working keyring ({why}); the admin key is in a 0600 file instead", err=True)
    typer.echo(f"admin key {fp} of cluster {cluster} kept in the {where}, and trusted with the admin role", err=True)
