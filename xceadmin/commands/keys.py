"""`xceadmin keys` (KEY-2, KEY-5, CLI-4): the host keys of XCE.

- `keys gen` makes this xced's Ed25519 key pair in its TopDir (`<TopDir>/keys/host.key`,
  0600, never printed; `host.pub` beside it) and prints the public key and its fingerprint.
  It is local: no daemon is asked.
- `keys trust`, `revoke`, `list` and `token` change or read the controller's trusted list
  (config/keys.yaml, and the revocations in its store): through its Unix socket on the
  controller's host, as a cluster admin (SO_PEERCRED); from another host with `xceadmin
  --controller tcp://HOST:PORT --controller-key FILE|SHA256:...`, signed with the admin key
  (issue 14 "Local or live"; xceadmin.connect).
- `keys gen --admin` makes xceadmin's own key (the `admin` role, KEY-3), kept in the OS
  keyring or a 0600 file, and says which. On the controller's host it trusts it at once;
  elsewhere it prints the public key and how to trust it there by hand. `keys pub` prints
  a public key again.
"""

from __future__ import annotations

import re
from typing import List, Optional

import typer

from xceadmin.connect import nonblank_topdir

app = typer.Typer(no_args_is_help=True, help="Host keys: each xced has its own Ed25519 key pair; only public keys move.")



@app.command("gen")
def gen(
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir,
                                         help="the TopDir of the xced the key is for (default: XCE_TOPDIR, else "
                                              "the personal cluster's)"),
    force: bool = typer.Option(False, "--force", help="replace an existing key pair (the old one is then no longer "
                                                      "this host's: trust the new public key)"),
    admin: bool = typer.Option(False, "--admin", help="make xceadmin's own key instead (the admin role), kept in the "
                                                      "OS keyring or a 0600 file, and trust it on the controller"),
    cluster: Optional[str] = typer.Option(None, "--cluster", metavar="NAME",
                                          help="with --admin: make the key of cluster NAME here, without asking any "
                                               "controller; trust the printed public key on the controller by hand"),
    as_json: bool = typer.Option(False, "--json", help="print {fingerprint, public_key, private_key_file, "
                                                       "public_key_file}; with --admin {fingerprint, public_key, "
                                                       "stored, keyring_error, cluster, host, trusted}"),
) -> None:
    """Make this xced's key pair: TopDir/keys/host.key (0600, never printed) and host.pub.
    Prints the public key line on stdout (give it to `xceadmin keys trust` on the controller).

    With --admin: xceadmin's own key (KEY-3), kept in the OS keyring (or a 0600 file where
    none works; it says which), for the host --key-host names (default: this machine's). On
    the controller's host (its Unix socket, you an admin named in xce.yaml) it is trusted
    with the admin role at once. From another host (xceadmin --controller URL
    --controller-key KEY, which names the cluster; or --cluster NAME) it is only made and
    kept: the public key line is printed, to be trusted on the controller with `xceadmin
    keys trust FILE --role admin --host HOST`."""
    import json
    import os
    import socket

    if admin:
        _gen_admin(topdir, force, as_json, cluster)
        return
    if cluster is not None:
        raise typer.BadParameter("--cluster is for --admin: a host key belongs to its TopDir, not to a cluster")

    from xced.auth.keys import KEYS_DIR, fingerprint, generate, write_key_pair
    from xced.constants import resolve_topdir

    top = resolve_topdir(topdir)
    if top.exists() and not top.is_dir():
        raise typer.BadParameter(f"--topdir {top} is not a directory; give the TopDir of the xced this key is for")
    if not top.exists():  # a new worker or login host: its xced makes the rest of its TopDir at start
        try:
            top.mkdir(mode=0o755, parents=True)
        except OSError as e:
            raise typer.BadParameter(f"cannot make the TopDir {top}: {e.strerror}") from None
    kdir = top / KEYS_DIR
    key = generate()
    old = None
    if force and (kdir / "host.pub").is_file():
        from xced.auth.keys import KeyProblem, parse_public_key

        try:
            old = fingerprint(parse_public_key((kdir / "host.pub").read_text(errors="replace")))
        except (KeyProblem, OSError):
            old = None
    try:
        priv, pub_path, line = write_key_pair(kdir, key, socket.gethostname(), overwrite=force)
        # 0711: host.pub is read by name (peers pin it), the directory is listed by its owner alone
        os.chmod(kdir, 0o711)
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
    if old is not None and old != fp:
        typer.echo(f"warning: this replaced key {old}: the controller's trusted list and the peers that pin this "
                   f"host (a controller's workers and login hosts) still know that one; trust the new public key, "
                   f"and give its peers the new host.pub (--controller-key)", err=True)


def _client(topdir: str | None):
    """The controller's client (xceadmin.connect): its Unix socket, or its TCP port signed
    with the admin key when --controller (or XCE_CONTROLLER with XCE_CONTROLLER_KEY) says so."""
    from xceadmin.connect import connect

    return connect(topdir)


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
    """--expires as the trust request takes it: {} when none is given (a new key never
    expires; one trusted again keeps its expiry), {"expires": None} for "never",
    {"expires_in_s": S} for a duration (counted on the daemon's clock), {"expires": T} for a
    UTC time. Raises typer.BadParameter (a time in the past too, by this machine's clock)."""
    import time

    from xced.config.keys import parse_time

    if text is None:  # none given: a new key never expires, a key trusted again keeps its expiry
        return {}
    if text.strip().lower() == "never":
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
        if at - time.time() > _MAX_TRUST_S:
            raise typer.BadParameter(f"{what} {text}: a key is trusted for at most 10 years (3650d) at once")
        return {"expires": at}
    life = parse_duration(t, what)
    if life > _MAX_TRUST_S:
        raise typer.BadParameter(f"{what} {text}: a key is trusted for at most 10 years (3650d) at once")
    return {"expires_in_s": life}


#: the longest a key is trusted for at once, seconds (the controller's MAX_KEY_LIFE_S)
_MAX_TRUST_S = 10 * 365 * 86400


def _host(host: str) -> str:
    if not _HOST.fullmatch(host):
        raise typer.BadParameter(f"--host {host[:80]!r}: a host name is a letter or digit, then letters, digits, "
                                 f"'_', '.' and '-' (at most 255)")
    return host


def _when(t: float | None) -> str:
    from xced.config.keys import format_time

    return format_time(t) or "never"


_TOPDIR = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir, help="the controller's TopDir (default: XCE_TOPDIR, else the "
                                                             "personal cluster's)")


@app.command("trust")
def trust(
    pubkey_file: str = typer.Argument(..., metavar="PUBKEY-FILE", help="the host's public key (its keys/host.pub), "
                                                                       "or - for stdin"),
    host: str = typer.Option(..., "--host", help="the host the key belongs to"),
    role: List[str] = typer.Option(..., "--role", metavar="worker|scheduler|apiserver|admin",
                                   help="worker, scheduler, apiserver or admin (repeatable)"),
    expires: Optional[str] = typer.Option(None, "--expires", metavar="WHEN", help="90d, 12h, a UTC time (2027-03-01T12:00:00Z), or "
                                                                  "never (the default)"),
    comment: str = typer.Option("", "--comment", metavar="TEXT", help="free text kept with the key"),
    unrevoke: bool = typer.Option(False, "--unrevoke", help="trust a revoked key again (logged)"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
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
    reason: Optional[str] = typer.Option(None, "--reason", metavar="TEXT", help="why, kept with the revocation"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
) -> None:
    """Revoke a key (KEY-4): recorded in the controller's store, where it outlives any edit of
    keys.yaml; returns once every channel authenticated with it is closed."""
    import json

    if len(fingerprint) > 128 or not fingerprint.strip():
        raise typer.BadParameter(f"{fingerprint[:60]!r}: a fingerprint is SHA256: and 43 characters, or a start of "
                                 f"it (xceadmin keys list shows them)")
    if reason is not None and len(reason) > 1024:
        raise typer.BadParameter(f"--reason: {len(reason)} characters, more than the 1024 kept")
    from xced.api.errors import DaemonUnreachable
    from xceadmin.signed import AdminClient

    with _client(topdir) as c:
        own = c.key_fingerprint() if isinstance(c, AdminClient) else None
        prefix = fingerprint if fingerprint.startswith("SHA256:") else "SHA256:" + fingerprint
        try:
            out = c.request("POST", "/keys/revoke", json={"fingerprint": fingerprint, "reason": reason}).json()
        except DaemonUnreachable:
            # the admin key this request is signed with: the controller closes its connections,
            # this one too, before it can answer (KEY-4); its refusal of the key then says it is done
            if own is None or not own.startswith(prefix) or not c.confirm_revoked():
                raise
            out = {"fingerprint": own, "host": c.key_host, "closed": None, "already": None, "own_key": True}
    if as_json:
        print(json.dumps(out, indent=2))
        return
    if out.get("own_key"):
        typer.echo(f"revoked {out['fingerprint']} (host {out['host']}), the admin key this xceadmin signs with: the "
                   f"controller closed this connection with it, and refuses the key from now on", err=True)
        return
    closed = f"; {out['closed']} channel{'s' if out['closed'] != 1 else ''} closed"
    host = f" (host {out['host']})" if out["host"] else ""
    if out.get("already"):
        typer.echo(f"{out['fingerprint']}{host} was revoked already, {_when(out['already']['time'])} by "
                   f"{out['already']['actor']}{closed}", err=True)
        return
    typer.echo(f"revoked {out['fingerprint']}{host}{closed}", err=True)


@app.command("list")
def list_(topdir: Optional[str] = _TOPDIR, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
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
    role: List[str] = typer.Option(..., "--role", metavar="worker|scheduler|apiserver",
                                   help="the role the enrolled host gets: worker, scheduler or "
                                                        "apiserver (one)"),
    host: Optional[str] = typer.Option(None, "--host", help="bind the token to this host name"),
    expires: str = typer.Option("1h", "--expires", metavar="DURATION", help="how long it is valid: 1h, 30m, 2d (at most 7 days)"),
    topdir: Optional[str] = _TOPDIR,
    as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
) -> None:
    """Print a one-time enrolment token (KEY-5) for a new host; the controller keeps only its digest."""
    import json

    if len(role) == 1 and role[0] not in ("worker", "scheduler", "apiserver"):
        raise typer.BadParameter(f"--role {role[0][:40]!r}: an enrolled host joins as worker, scheduler or apiserver "
                                 f"(an admin key is made with `xceadmin keys gen --admin`)")
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
    role: str = typer.Option("worker", "--role", metavar="worker|scheduler|apiserver",
                              help="the role the token is for: worker, scheduler or apiserver"),
    host: Optional[str] = typer.Option(None, "--host", help="this host's name as the token and the cluster know it "
                                                            "(default: this machine's name)"),
    controller_key: Optional[str] = typer.Option(None, "--controller-key", metavar="FILE|SHA256:...",
                                                 help="the controller's key, when the token carries none"),
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir,
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


_CLUSTER = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _check_cluster(name: str) -> str:
    """--cluster NAME as xce.yaml's cluster_name takes it; typer.BadParameter otherwise."""
    if not _CLUSTER.fullmatch(name) or name in (".", ".."):
        raise typer.BadParameter(f"--cluster {name[:80]!r}: a cluster name is letters, digits, '_', '.' and '-' "
                                 f"(xce.yaml's cluster_name)")
    return name


def _refuse_existing(cluster: str, force: bool) -> None:
    """Conflict when cluster `cluster` has an admin key here already and --force is not given."""
    from xced.api.errors import Conflict
    from xced.auth.admin_key import load_admin_key
    from xced.auth.keys import KeyProblem

    try:
        old = load_admin_key(cluster)
    except KeyProblem:
        old = True
    if old is not None and not force:
        raise Conflict(f"an admin key of cluster {cluster} exists already; give --force to make a new one (and "
                       f"`xceadmin keys revoke` the old one)")


def _store(cluster: str, key):
    """Keep `key` as the admin key of `cluster`: (where, keyring_error) of store_admin_key.
    Raises InvalidRequest when neither the keyring nor the file takes it."""
    from xced.api.errors import InvalidRequest
    from xced.auth.admin_key import store_admin_key

    try:
        return store_admin_key(cluster, key)
    except OSError as e:
        raise InvalidRequest(f"could not keep the admin key of cluster {cluster} (no working keyring, and the "
                             f"file: {e.strerror or e})") from None


def _cluster_of(topdir: str | None, cluster: str | None, what: str) -> tuple[str, object | None]:
    """The cluster an admin-key command is about, and the local client when it asked the
    controller's Unix socket (None otherwise): --cluster NAME as given; else the cluster the
    remote controller names (xceadmin --controller); else the local controller's /info.
    Raises DaemonUnreachable (saying --cluster would do without a controller), BadParameter."""
    from xced.api.errors import DaemonUnreachable
    from xceadmin.connect import connect, remote_target

    if cluster is not None:
        return _check_cluster(cluster), None
    if remote_target(topdir) is not None:
        with connect(topdir) as c:
            return c.cluster_name(), None
    c = None
    try:
        c = connect(topdir)
        return c.request("GET", "/info").json()["cluster_name"], c
    except DaemonUnreachable as e:
        if c is not None:
            c.close()
        raise DaemonUnreachable(f"{e.message}. On a host other than the controller's, {what} with --cluster NAME, "
                                f"or ask the controller over TCP: xceadmin --controller tcp://HOST:PORT "
                                f"--controller-key FILE|SHA256:...") from None
    except BaseException:
        if c is not None:
            c.close()
        raise


def _gen_admin(topdir: str | None, force: bool, as_json: bool, cluster_opt: str | None) -> None:
    """`keys gen --admin` (KEY-3): the admin key of the cluster, kept in the keyring or its
    0600 file, for host `xceadmin --key-host` (default: this machine's). Asked of the
    controller's Unix socket, it is trusted there with the admin role at once (the caller
    must be an admin named in xce.yaml); otherwise (--cluster, or a remote controller that
    names the cluster but cannot trust a key without an admin key already trusted) it is
    only kept, and the message says how to trust it on the controller by hand."""
    import getpass

    from xced.api.errors import PermissionDenied
    from xced.auth.keys import fingerprint, generate, public_line
    from xceadmin.connect import key_host

    host = key_host()
    cluster, c = _cluster_of(topdir, cluster_opt, "make the key")
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "admin"
    if c is None:  # another host: make and keep it; the admin trusts it on the controller
        _refuse_existing(cluster, force)
        key = generate()
        pub = public_line(key.public_key(), f"xceadmin {user}@{host}")
        where, why = _store(cluster, key)
        fp = fingerprint(key.public_key())
        if _say_admin_key(as_json, fp, pub, where, why, cluster, host, False):
            return
        typer.echo(f"admin key {fp} of cluster {cluster} kept in the {where}; not trusted yet. On the controller's "
                   f"host, put the line above in a file and run: xceadmin keys trust FILE --role admin --host {host}"
                   f"   (`xceadmin keys pub --admin --cluster {cluster}` prints the line again)", err=True)
        if force:
            typer.echo("warning: the admin key it replaced may still be trusted there; revoke it (`xceadmin keys "
                       "revoke FINGERPRINT`) once the new one is", err=True)
        return
    with c:
        info = c.request("GET", "/info").json()
        if not info.get("is_admin"):
            raise PermissionDenied(f"user {info.get('user')} is not a cluster admin of {info.get('cluster_name')}; "
                                   f"the first admin key is made by an admin named in xce.yaml, on the controller's "
                                   f"host")
        _refuse_existing(cluster, force)
        key = generate()
        comment = f"xceadmin {info.get('user')}@{host}"
        pub = public_line(key.public_key(), comment)
        out = c.request("POST", "/keys/trust", json={"public_key": pub, "host": host, "roles": ["admin"],
                                                      "expires": None, "comment": comment}).json()
        try:
            where, why = _store(cluster, key)
        except Exception:
            c.request("POST", "/keys/revoke", json={"fingerprint": out["fingerprint"],
                                                     "reason": "its private key could not be stored"})
            raise
    fp = fingerprint(key.public_key())
    if _say_admin_key(as_json, fp, pub, where, why, cluster, host, True):
        return
    typer.echo(f"admin key {fp} of cluster {cluster} kept in the {where}, and trusted with the admin role for "
               f"host {host}", err=True)


def _say_admin_key(as_json: bool, fp: str, pub: str, where: str, why: str | None, cluster: str, host: str,
                   trusted: bool) -> bool:
    """Print a new admin key: its JSON (and True: nothing more to say), or its public line
    on stdout and, when no keyring worked, the warning on stderr (False)."""
    import json

    if as_json:
        print(json.dumps({"fingerprint": fp, "public_key": pub, "stored": where, "keyring_error": why,
                          "cluster": cluster, "host": host, "trusted": trusted}, indent=2))
        return True
    print(pub)
    if why is not None:
        typer.echo(f"warning: no working keyring ({why}); the admin key is in a 0600 file instead", err=True)
    return False


@app.command("pub")
def pub(
    admin: bool = typer.Option(False, "--admin", help="xceadmin's admin key of the cluster instead of this xced's "
                                                      "host key"),
    cluster: Optional[str] = typer.Option(None, "--cluster", metavar="NAME",
                                          help="with --admin: the cluster whose admin key (default: the cluster of "
                                               "the controller reached as the other commands do)"),
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR", callback=nonblank_topdir,
                                         help="the TopDir of the xced whose host key (default: XCE_TOPDIR, else "
                                              "the personal cluster's)"),
    as_json: bool = typer.Option(False, "--json", help="print {fingerprint, public_key}"),
) -> None:
    """Print a public key line on stdout, to trust on the controller (`xceadmin keys trust
    FILE`): this xced's (TopDir/keys/host.pub), or with --admin xceadmin's admin key of the
    cluster, from the keyring or its file. The private key is never printed."""
    import json

    from xced.api.errors import InvalidRequest, NotFound, PermissionDenied
    from xced.auth.keys import KeyProblem, fingerprint, public_line

    if admin:
        import getpass

        from xced.auth.admin_key import load_admin_key
        from xceadmin.connect import key_host
        from xceadmin.signed import no_admin_key_message

        name, c = _cluster_of(topdir, cluster, "name the cluster")
        if c is not None:
            c.close()
        try:
            key = load_admin_key(name)
        except KeyProblem as e:
            raise InvalidRequest(str(e)) from None
        if key is None:
            raise NotFound(no_admin_key_message(name, key_host()))
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "admin"
        line = public_line(key.public_key(), f"xceadmin {user}@{key_host()}")
        fp = fingerprint(key.public_key())
    else:
        if cluster is not None:
            raise typer.BadParameter("--cluster is for --admin: a host key belongs to its TopDir, not to a cluster")
        from xced.auth.keys import KEYS_DIR, PUBLIC_KEY, parse_public_key
        from xced.constants import resolve_topdir

        path = resolve_topdir(topdir) / KEYS_DIR / PUBLIC_KEY
        try:
            line = path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            raise NotFound(f"no host key in {path.parent}; make one with `xceadmin keys gen --topdir DIR`") from None
        except OSError as e:
            raise PermissionDenied(f"cannot read {path}: {e.strerror or e}") from None
        try:
            fp = fingerprint(parse_public_key(line, str(path)))
        except KeyProblem as e:
            raise InvalidRequest(str(e)) from None
    if as_json:
        print(json.dumps({"fingerprint": fp, "public_key": line}, indent=2))
        return
    print(line)
    typer.echo(f"fingerprint {fp}", err=True)
