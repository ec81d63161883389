"""`xceadmin build`: validate and compile the config of a TopDir (CLI-4, CFG-2)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from xceadmin.connect import nonblank_topdir

HELP = (
    "Check and compile config/xce.yaml, queues.yaml and hosts.yaml of the TopDir, and the optional "
    "applications.yaml, projects.yaml and rbac.yaml, and the server presets of config/presets/ (or "
    "xce.yaml's presets_dir), each as the daemon reads it (PRE-3).\n\n"
    "Prints every error as FILE:LINE:COL: error: MESSAGE, then the warnings, on stderr, "
    "and on success 'config OK: N queues, M hosts[, P projects][, S server presets], hash SHA256' on stdout. "
    "Exit 0 when there is no error, 1 otherwise.\n\n"
    "--json prints {ok, hash, errors, warnings} on stdout instead, each diagnostic "
    "being {severity, file, line, col, message}.\n\n"
    "--apply then hands the compiled config to the TopDir's running xced (CFG-3), which checks "
    "it again and swaps it in whole or refuses it whole; pending jobs are re-merged with the new "
    "profiles and queues. Admins only. With `xceadmin --controller URL --controller-key KEY` it goes "
    "to that controller over TCP, signed with the admin key; the controller's trusted list then stays "
    "as it is (keys.yaml is changed by `xceadmin keys` only). "
    "Exit 0 applied, 1 refused or invalid, 3 no daemon."
)


def build(
    topdir: Annotated[
        Optional[str],  # noqa: UP007 (Typer reads the annotation at run time)
        typer.Option(
            "--topdir",
            metavar="DIR",
            callback=nonblank_topdir,
            help="TopDir to compile; default $XCE_TOPDIR, else the user's data dir.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the result as one JSON object on stdout."),
    ] = False,
    apply: Annotated[
        bool,
        typer.Option("--apply", help="Hand the compiled config to the running daemon (CFG-3)."),
    ] = False,
) -> None:
    import json
    import sys

    from xced.config import load_cluster_config
    from xced.constants import resolve_topdir

    top = resolve_topdir(topdir)
    result = load_cluster_config(top)
    presets = _check_presets(top, result)
    if result.ok:
        _write_lsf_conf(top)
    if apply and result.ok and result.config is not None:
        _apply(top, result, as_json)
        return
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        _print_diagnostics(result.errors + result.warnings)
        if result.ok and result.config is not None:
            nq, nh = len(result.config.queues), len(result.config.hosts)
            np_ = len(result.config.projects.projects)
            typer.echo(
                f"config OK: {nq} queue{'s' if nq != 1 else ''}, {nh} host{'s' if nh != 1 else ''}, "
                + (f"{np_} project{'s' if np_ != 1 else ''}, " if np_ else "")
                + (f"{presets} server preset{'s' if presets != 1 else ''}, " if presets else "")
                + f"hash {result.hash}"
            )
        else:
            n = len(result.errors)
            if n > 1:
                typer.echo(f"config has {n} errors; nothing compiled", err=True)
    raise typer.Exit(0 if result.ok else 1)


def _write_lsf_conf(top) -> None:
    """`<TopDir>/lsf.conf` for LSF tools reading LSF_ENVDIR (issue 18 part 5; the daemon
    writes it at start too): a TopDir the caller cannot write is a warning, not a failure of
    the build."""
    import sys

    from xced.config.lsfconf import write_lsf_conf

    try:
        write_lsf_conf(top)
    except OSError as e:
        print(f"warning: cannot write {top / 'lsf.conf'} (for LSF tools through LSF_ENVDIR): {e.strerror or e}",
              file=sys.stderr)


def _check_presets(top, result) -> int:
    """PRE-3: the server preset files, checked as the daemon reads them; each problem is a
    warning of the build (FILE:LINE:COL, "not served: ..."), since the daemon leaves such a
    file out and the presets are no part of the config. A preset naming a queue, profile or
    project the config does not have is a warning too: a job submitted with it would be
    refused. Returns how many presets are valid."""
    from xced.config.diagnostics import Diagnostic
    from xced.config.presets import load_presets_dir, presets_directory

    cfg = result.config
    pdir = presets_directory(top, cfg.settings.presets_dir if cfg is not None else None)
    if cfg is not None and cfg.settings.presets_dir and not pdir.exists():
        result.warnings.append(Diagnostic("warning", str(top / "config" / "xce.yaml"), None, None,
                                          f"presets_dir {cfg.settings.presets_dir!r}: {pdir} does not exist, so no "
                                          f"server preset is served"))
    errors: list = []
    warnings: list = []
    found = load_presets_dir(pdir, errors, warnings)
    if cfg is not None:
        known = {"queue": {q.name for q in cfg.queues}, "app": set(cfg.applications) | {"default", ""},
                 "project": {p.path for p in cfg.projects.projects}}
        for pr in found:
            for key, names in known.items():
                v = pr.values.get(key)
                if v is not None and v not in names and not (key == "project" and not names):
                    what = {"queue": "queue", "app": "application profile", "project": "project"}[key]
                    warnings.append(Diagnostic("warning", pr.path, None, None,
                                               f"preset {pr.name}: {key} {v!r} is no {what} of this config, so a "
                                               f"job submitted with it would be refused"))
    # warnings, not errors: the presets are not part of the config, and the daemon only leaves a
    # bad one out, so a bad preset must not stop a config from being built or applied
    for e in errors:
        warnings.append(Diagnostic("warning", e.file, e.line, e.col, f"not served: {e.message}"))
    result.warnings.extend(warnings)
    return len(found)


def _apply(top, result, as_json: bool) -> None:
    """Send the compiled config to the daemon of TopDir `top` (its Unix socket), or to the
    controller of `xceadmin --controller` (signed with the admin key, xceadmin.connect), and
    print what it did. Over TCP the trusted list stays the controller's (`_keep_trusted_list`)."""
    import json
    import sys

    from xceadmin.connect import connect
    from xceadmin.signed import AdminClient

    _print_diagnostics(result.warnings)
    with connect(str(top), topdir_names_daemon=False) as c:
        config, content_hash = result.config, result.hash
        remote = isinstance(c, AdminClient)
        if remote:  # another host's copy of the config: its keys.yaml is not in force
            config, content_hash = _keep_trusted_list(c, top, config)
        out = c.apply_config(config.model_dump(mode="json"), content_hash)
    if remote:  # a fresh tester: the apply was lost at the controller's next restart, without a word
        typer.echo(f"warning: applied to the running controller only: its own config files are unchanged, so its "
                   f"next restart goes back to them; copy {top / 'config'} to the controller's TopDir to keep it",
                   err=True)
    if as_json:
        sys.stdout.write(json.dumps({**result.to_dict(), "applied": out.model_dump()}, indent=2) + "\n")
        return
    typer.echo(f"config applied: hash {out.hash} (was {out.previous_hash}); "
               f"{out.remerged} pending job{'s' if out.remerged != 1 else ''} re-merged"
               + (f", {len(out.held)} held (listed on stderr)" if out.held else ""))
    for line in out.held:
        typer.echo(f"held: {line}", err=True)


def _keep_trusted_list(client, top, config):
    """A config applied from another host keeps the controller's trusted list in force
    (KEY-2, CFG-1: keys.yaml is the controller's, written only by `xceadmin keys` there):
    the compiled config with its `keys` replaced by the controller's (GET /keys), and that
    config's content hash. A local keys.yaml that differs is named on stderr, and nothing of
    it is applied: applying a stale copy would drop keys trusted since (the admin key this
    very request is signed with among them) and leave the controller's keys.yaml behind the
    list in force."""
    from xced.model.keys import KeysConfig

    rows = client.request("GET", "/keys").json()["keys"]
    fields = ("fingerprint", "public_key", "host", "roles", "expires", "added", "comment")
    keys = KeysConfig.model_validate({"keys": [{f: r[f] for f in fields} for r in rows
                                               if r.get("public_key") is not None and r.get("host") is not None]})
    if keys != config.keys:
        theirs = {k.fingerprint for k in keys.keys}
        ours = {k.fingerprint for k in config.keys.keys}
        diff = [f"{len(ours - theirs)} of its keys not trusted there"] if ours - theirs else []
        diff += [f"{len(theirs - ours)} keys trusted there missing from it"] if theirs - ours else []
        typer.echo(f"warning: {top / 'config' / 'keys.yaml'} differs from the controller's trusted list ("
                   f"{', '.join(diff) or 'entries differ'}); applying from another host keeps the controller's "
                   f"(keys.yaml is changed by `xceadmin keys trust|revoke` only)", err=True)
    new = config.model_copy(update={"keys": keys})
    return new, new.content_hash()


def _print_diagnostics(diagnostics: list) -> None:
    """One line per diagnostic on stderr, `error`/`warning` coloured on a terminal."""
    if not diagnostics:
        return
    from rich.console import Console
    from rich.text import Text

    from xced.api.listing import one_line

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for d in diagnostics:  # escaped as str(d) is: a bidi override quoted from the file cannot reorder the line
        style = "bold red" if d.severity == "error" else "yellow"
        line = Text(one_line(f"{d.location}: "))
        line.append(d.severity, style=style)
        line.append(one_line(f": {d.message}"))
        console.print(line)
