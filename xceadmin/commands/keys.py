"""`xceadmin keys` (KEY-2, KEY-5, CLI-4): the host keys of XCE.

Built so far: `keys gen`, which makes this xced's Ed25519 key pair in its TopDir
(`<TopDir>/keys/host.key`, 0600, never printed; `host.pub` beside it) and prints the
public key and its fingerprint. Trusting, revoking, listing and enrolment tokens, which
change the controller's trusted list (config/keys.yaml), come with the join (issue 14).
"""

from __future__ import annotations

from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, help="Host keys: each xced has its own Ed25519 key pair; only public keys move.")

#: where an xced keeps its key pair, under its TopDir
KEYS_DIR = "keys"
PRIVATE_KEY = "host.key"
PUBLIC_KEY = "host.pub"


@app.command("gen")
def gen(
    topdir: Optional[str] = typer.Option(None, "--topdir", metavar="DIR",
                                         help="the TopDir of the xced the key is for (default: XCE_TOPDIR, else "
                                              "the personal cluster's)"),
    force: bool = typer.Option(False, "--force", help="replace an existing key pair (the old one is then no longer "
                                                      "this host's: trust the new public key)"),
    as_json: bool = typer.Option(False, "--json", help="print {fingerprint, public_key, private_key_file, "
                                                       "public_key_file}"),
) -> None:
    """Make this xced's key pair: TopDir/keys/host.key (0600, never printed) and host.pub.
    Prints the public key line on stdout (give it to `xceadmin keys trust` on the controller)."""
    import json
    import os
    import socket

    from xced.auth.keys import fingerprint, generate, public_line, write_private_key
    from xced.constants import resolve_topdir

    top = resolve_topdir(topdir)
    if not top.is_dir():
        raise typer.BadParameter(f"TopDir {top} does not exist; give --topdir DIR of the xced this key is for "
                                 f"(`xceadmin init DIR` makes one)")
    kdir = top / KEYS_DIR
    priv, pub_path = kdir / PRIVATE_KEY, kdir / PUBLIC_KEY
    key = generate()
    try:
        write_private_key(priv, key, overwrite=force)
        if os.stat(kdir).st_mode & 0o077:
            os.chmod(kdir, 0o700)
    except FileExistsError as e:
        from xced.api.errors import Conflict

        raise Conflict(str(e)) from None
    except OSError as e:
        from xced.api.errors import InvalidRequest

        raise InvalidRequest(f"cannot write the key pair in {kdir}: {e.strerror or e}") from None
    line = public_line(key.public_key(), socket.gethostname())
    tmp = pub_path.with_name(f".{PUBLIC_KEY}.tmp")
    tmp.write_text(line + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, pub_path)
    fp = fingerprint(key.public_key())
    if as_json:
        print(json.dumps({"fingerprint": fp, "public_key": line, "private_key_file": str(priv),
                          "public_key_file": str(pub_path)}, indent=2))
        return
    print(line)
    typer.echo(f"wrote {priv} (0600) and {pub_path}; fingerprint {fp}", err=True)
