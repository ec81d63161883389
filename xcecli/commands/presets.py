"""`xcecli presets` (PRE-1 to PRE-5, CLI-3): the user's own submit defaults.

    xcecli presets create gpu-train -q gpu -n 4 -R 'rusage[gpu=1]' -W 2:00 -a pytorch
    xcecli submit --preset gpu-train -- python train.py
    xcecli presets list | show NAME | edit NAME | rm NAME
    xcecli presets pull site-default [--as NEW] [--force]
    xcecli presets export gpu-train > p.yaml;  xcecli presets import p.yaml
    xcecli presets report

Local presets live in the user's config directory (xcecli.presets); server presets are the
site's, read-only (GET /xce/v1/presets). Submit uses local presets only. A refused
command writes and overwrites nothing; `--force` keeps the replaced file as NAME.yaml.bak.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import List, Optional

import typer

from xcecli.commands.submit import with_parameters

presets_app = typer.Typer(no_args_is_help=True, help="Presets: named sets of submit options (submit --preset NAME).")


def _refuse(msg: str):
    from xced.api.errors import InvalidRequest

    raise InvalidRequest(msg)


def _name(name: str) -> str:
    """A preset name from the command line, checked (PRESET_NAME_FORM). Raises
    typer.BadParameter (a usage error, exit 2, as for any malformed argument)."""
    from xced.api.submit_options import OptionError, check_preset_name

    try:
        return check_preset_name(name)
    except OptionError as e:
        raise typer.BadParameter(e.message) from None


def _checked(values: dict, what: str) -> dict:
    """Submit option values from the command line, held to what submit accepts and to what
    the daemon would parse (PRE-1: refused when the preset is made, not only when used).
    Raises typer.BadParameter (exit 2), as submit does for the same values."""
    from xced.api.submit_options import OptionError, check_values

    try:
        check_values(values, deep=True)
    except OptionError as e:
        raise typer.BadParameter(f"{what}: {e.message}") from None
    return values


def _from_server(values: object, what: str) -> dict:
    """A server preset's values as the server sent them, held to this client's submit
    options (the daemon may be of another version): canonical, checked. Raises
    InvalidRequest (exit 1): the server's answer, not the user's input, is at fault."""
    from xced.api.submit_options import OptionError, check, normalize

    if not isinstance(values, dict):
        _refuse(f"{what}: the server sent no mapping of values")
    out = {}
    try:
        for k, v in values.items():
            out[k] = normalize(k, v)
            check(k, out[k], deep=True)
    except OptionError as e:
        _refuse(f"{what}: {e.message}; nothing written")
    return out


def _server_name(client) -> str:
    return client.request("GET", "/info").json()["cluster_name"]


def _placement(target: str, incoming_hash: str, came_from: dict | None, force: bool, how: str) -> str:
    """How preset `target` is to be written (PRE-4, PRE-5): "new" (no such local preset),
    "update" (an unchanged pulled copy of that very server preset: pulling again updates
    it), "current" (that copy holds the server's values already), "same" (an import of the
    very values it holds), or "replace" (`force` over a preset that came from elsewhere or
    was changed here: the old file kept as .bak). Anything else is refused (InvalidRequest)
    with the hint of --as and --force. `came_from`: the {server, name} of a pull; None for an
    import."""
    from xcecli import presets as store

    if not store.exists(target):
        return "new"
    try:
        local = store.load(target)
    except store.PresetInvalid:
        local = None
    edited = local is not None and local.origin is not None and local.hash != local.origin.get("hash")
    pulled_here = local is not None and came_from is not None and local.origin is not None and \
        local.origin.get("server") == came_from["server"] and local.origin.get("name") == came_from["name"]
    if pulled_here and not edited:
        return "current" if local.hash == incoming_hash else "update"
    if local is not None and came_from is None and local.hash == incoming_hash:
        return "same"
    if force:
        return "replace"
    if local is None:
        where = "is not a valid preset"
    elif pulled_here:
        where = "was changed here since it was pulled"
    elif local.origin:
        where = f"came from server preset {local.origin.get('name')} of {local.origin.get('server')}"
    else:
        where = "was made here" if came_from is not None else "holds other values"
    _refuse(f"a local preset {target} exists and {where}; {how} with --as NEW to keep both, or --force to "
            f"replace it (the old file is kept as {target}.yaml.bak)")
    return ""


def _write(target: str, values: dict, origin: dict | None, *, backup: bool) -> None:
    from xcecli import presets as store

    try:
        store.save(target, values, origin, backup=backup)
    except OSError as e:
        _refuse(f"cannot write preset {target} in {store.presets_dir()}: {e.strerror or e}")


def _server_hint(ctx, name: str) -> str:
    """"; a server preset NAME exists: ..." when the daemon has one of that name, else ""
    (and "" when the daemon cannot be asked: the local answer stands on its own)."""
    from xced.api.errors import XceError

    try:
        ctx.obj.client().request("GET", f"/presets/{name}", timeout=5)
    except XceError:
        return ""
    return f"; a server preset {name} exists: `xcecli presets show --server {name}`, or `xcecli presets pull {name}`"


def _yaml_values(values: dict) -> str:
    from xcecli.presets import render_yaml

    return render_yaml("", values, header=False)


def register(app: typer.Typer) -> None:
    """Add `presets` and its commands to `app`."""
    from xced.api.submit_options import JOB_OPTIONS

    name_arg = inspect.Parameter("preset", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str,
                                 default=typer.Argument(..., metavar="NAME", help="the preset's name, e.g. gpu-train"))
    force_opt = inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                  default=typer.Option(False, "--force", help="replace a preset of that name "
                                                                              "(kept as NAME.yaml.bak)"))

    @presets_app.command("create")
    @with_parameters(name_arg, force_opt, options=JOB_OPTIONS)
    def create(ctx: typer.Context, preset: str, force: bool, **opts) -> None:
        """Create a preset from submit options: xcecli presets create NAME [SUBMIT OPTIONS]."""
        from xcecli import presets as store
        from xcecli.output import err

        name = _name(preset)  # the name first: no file for a bad one
        from xcecli.submitting import given_values
        from xcecli.usage import Usage

        try:
            values = given_values(opts)
        except Usage as e:
            raise typer.BadParameter(e.message) from None
        if not values:
            raise typer.BadParameter("give at least one submit option, e.g. xcecli presets create "
                                     f"{name} -q normal -W 1:00")
        _checked(values, f"preset {name}")
        existed = store.exists(name)
        if existed and not force:
            _refuse(f"a local preset {name} exists; give --force to replace it (the old file is kept as "
                    f"{name}.yaml.bak), or choose another name")
        _write(name, values, None, backup=existed)
        err(f"preset {name} {'replaced' if existed else 'created'}: {store.path_of(name)}")

    @presets_app.command("show")
    def show(ctx: typer.Context, name: str = typer.Argument(..., metavar="PRESET", help="the preset's name"),
             server: bool = typer.Option(False, "--server", help="the server's preset of that name"),
             as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)")) -> None:
        """Show a preset: its values as a preset file holds them, its hash, where it came from."""
        import json

        from xcecli import presets as store

        name = _name(name)
        if server:
            p = ctx.obj.client().request("GET", f"/presets/{name}").json()
            doc = {**p, "origin": None, "where": "server"}
        else:
            try:
                lp = store.load(name)
            except store.PresetMissing as e:
                raise type(e)(e.message + _server_hint(ctx, name)) from None
            doc = {"name": lp.name, "hash": lp.hash, "values": lp.values, "origin": lp.origin, "where": "local"}
        if as_json:
            print(json.dumps(doc, indent=2))
            return
        print(f"# {doc['where']} preset {doc['name']}  {doc['hash']}")
        if doc["origin"]:
            o = doc["origin"]
            print(f"# pulled from server preset {o['name']} of {o['server']} ({o['hash']})")
        sys.stdout.write(_yaml_values(doc["values"]))

    @presets_app.command("edit")
    def edit(name: str = typer.Argument(..., metavar="PRESET", help="the local preset's name")) -> None:
        """Edit a local preset in $VISUAL or $EDITOR; it is saved only if the result is valid (a
        refused edit is kept beside it, as .NAME.edit.DIGEST.yaml, for the next edit of the same preset)."""
        import hashlib
        import os
        import shlex
        import subprocess

        from xced.config.presets import load_preset_file
        from xcecli import presets as store
        from xcecli.output import err

        name = _name(name)
        if not store.exists(name):
            raise store.missing(name)
        path = store.path_of(name)
        try:
            old = path.read_bytes()
        except OSError as e:
            _refuse(f"cannot read preset {name} ({path}): {e.strerror or e}")
        # private, in the 0700 presets directory, and named after what it is an edit of
        draft = store.draft_path(name, hashlib.sha256(old).hexdigest())
        store.drop_drafts(name, keep=draft)  # drafts of what the preset was before are no edit of it now
        resumed = draft.exists()
        if not resumed:
            store.write_private(draft, old)
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        def untouched() -> bool:  # a draft made now and not edited: nothing to keep
            if not resumed and draft.exists() and draft.read_bytes() == old:
                draft.unlink()
                return True
            return False

        try:
            rc = subprocess.call([*shlex.split(editor), str(draft)])
        except (OSError, ValueError) as e:
            untouched()
            _refuse(f"cannot run the editor {editor!r} (VISUAL or EDITOR): {getattr(e, 'strerror', None) or e}; "
                    f"preset {name} is unchanged")
        if rc != 0:
            if untouched():
                _refuse(f"the editor ({editor}) exited with {rc}; preset {name} is unchanged")
            _refuse(f"the editor ({editor}) exited with {rc}; preset {name} is unchanged (the draft is kept: "
                    f"{draft})")
        if not draft.exists():
            _refuse(f"the editor left no file; preset {name} is unchanged")
        errors: list = []
        pr = load_preset_file(draft, errors, [], allow_origin=True, name=name)
        if pr is None:
            for e in errors:
                err(str(e))
            _refuse(f"preset {name} is unchanged: the edit is not a valid preset (problems above); the edit is "
                    f"kept in {draft}, and the next `xcecli presets edit {name}` opens it again")
        text = draft.read_text(encoding="utf-8")
        if text.encode("utf-8") == old:
            draft.unlink()
            err(f"preset {name} unchanged")
            return
        try:  # the text as edited, comments and all
            store.save_text(name, text, pr.values, pr.origin)
        except OSError as e:
            _refuse(f"cannot write preset {name} in {store.presets_dir()}: {e.strerror or e}")
        err(f"preset {name} saved: {path}" + (" (from the draft kept by the last edit)" if resumed else ""))

    @presets_app.command("rm")
    def rm(names: List[str] = typer.Argument(..., metavar="PRESET...", help="the presets to delete")) -> None:
        """Delete local presets."""
        from xcecli import presets as store
        from xcecli.output import err

        names = list(dict.fromkeys(_name(n) for n in names))
        for n in names:  # all or nothing: a missing one is refused with the list, before any is removed
            if not store.exists(n):
                raise store.missing(n)
        for n in names:
            err(f"preset {n} removed: {store.remove(n)}")

    @presets_app.command("list")
    def list_(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
              local_only: bool = typer.Option(False, "--local",
                                              help="local presets only; do not ask the server")) -> None:
        """Local presets, then the server's (marked server); an unreachable server is a note."""
        import json

        from xced.api.errors import DaemonUnreachable
        from xcecli import presets as store
        from xcecli.output import err, table

        local = []
        for n in store.names():
            try:
                lp = store.load_fast(n)
                local.append({"name": n, "hash": lp.hash, "origin": lp.origin, "values": lp.values, "problem": None})
            except store.PresetInvalid as e:
                local.append({"name": n, "hash": None, "origin": None, "values": None,
                              "problem": "not valid: " + e.message.split(": ", 1)[-1]})
        server = None
        if not local_only:
            try:
                server = ctx.obj.client().request("GET", "/presets").json()["presets"]
            except DaemonUnreachable as e:
                err(f"xcecli: note: server presets not listed: {e.message}")
        if as_json:
            print(json.dumps({"local": local, "server": server}, indent=2))
            return
        rows = []
        for p in local:
            o = p["origin"]
            rows.append([p["name"], "local", p["hash"][:19] if p["hash"] else "-",
                         p["problem"] or (f"pulled from {o['name']}@{o['server']}" if o else _summary(p["values"]))])
        for p in server or []:
            rows.append([p["name"], "server", p["hash"][:19], _summary(p["values"])])
        if not rows:
            err("no presets (xcecli presets create NAME [SUBMIT OPTIONS])")
            return
        table(["NAME", "WHERE", "HASH", "VALUES"], rows)

    @presets_app.command("pull")
    def pull(ctx: typer.Context, name: str = typer.Argument(..., help="the server preset"),
             as_: Optional[str] = typer.Option(None, "--as", metavar="NAME", help="the local name (default: the same)"),
             force: bool = typer.Option(False, "--force", help="replace a local preset of that name that came "
                                                               "from elsewhere (kept as NAME.yaml.bak)")) -> None:
        """Copy a server preset to a local one; pulling it again updates it."""
        from xcecli.output import err

        target = _name(as_ if as_ is not None else name)
        name = _name(name)
        client = ctx.obj.client()
        p = client.request("GET", f"/presets/{name}").json()
        cluster = _server_name(client)
        values = _from_server(p.get("values"), f"server preset {name}")
        from xced.api.submit_options import preset_hash

        if preset_hash(values) != p.get("hash"):
            _refuse(f"server preset {name}: its hash {p.get('hash')} does not match its values; nothing written")
        how = _placement(target, p["hash"], {"server": cluster, "name": name}, force, "pull")
        if how == "current":
            err(f"preset {target} is already server preset {name} of {cluster} as it is now; nothing to do")
            return
        _write(target, values, {"server": cluster, "name": name, "hash": p["hash"]}, backup=how == "replace")
        done = {"new": "pulled", "update": "updated", "replace": f"replaced (the old one kept as {target}.yaml.bak)"}
        err(f"preset {target} {done[how]} from server preset {name} of {cluster}")

    @presets_app.command("export")
    def export(names: List[str] = typer.Argument(..., help="the local presets to export"),
               output: Optional[str] = typer.Option(None, "-o", "--output", metavar="FILE", help="write to FILE (default: stdout)"),
               force: bool = typer.Option(False, "--force", help="overwrite FILE")) -> None:
        """Write local presets as one YAML file (name -> values) for `presets import`."""
        import os

        from xcecli import presets as store

        docs = [store.load(n) for n in dict.fromkeys(_name(n) for n in names)]
        text = "# xcecli presets export: preset name -> submit options (xcecli presets import FILE)\n"
        for p in docs:
            text += f"{p.name}:\n" + "".join("  " + line + "\n" for line in _yaml_values(p.values).splitlines())
        if output is None or output == "-":
            sys.stdout.write(text)
            return
        import stat as _stat

        try:
            st = os.lstat(output)
        except FileNotFoundError:
            st = None
        except OSError as e:
            _refuse(f"cannot write {output}: {e.strerror or e}")
        if st is not None and not _stat.S_ISREG(st.st_mode):
            _refuse(f"{output} is not a regular file (a link, a device or a directory?); export writes a new file, "
                    f"or stdout without -o")
        if st is not None and not force:
            _refuse(f"{output} exists; give --force to overwrite it")
        try:  # 0600, as the presets themselves: it may carry --env values
            store.write_private(Path(output), text.encode("utf-8"))
        except OSError as e:
            _refuse(f"cannot write {output}: {e.strerror or e}")

    @presets_app.command("import")
    def import_(source: str = typer.Argument(..., help="an export file, or - for stdin"),
                as_: Optional[str] = typer.Option(None, "--as", metavar="NAME", help="the local name (for a file of one preset)"),
                force: bool = typer.Option(False, "--force", help="replace local presets of those names "
                                                                  "(kept as NAME.yaml.bak)")) -> None:
        """Add the presets of an export file; all or nothing."""
        from xced.config.presets import MAX_EXPORT_BYTES, load_export_text
        from xcecli.output import err

        shown = "<stdin>" if source == "-" else source
        try:
            if source == "-":
                raw = sys.stdin.buffer.read(MAX_EXPORT_BYTES + 1)
            else:
                with open(source, "rb") as f:
                    raw = f.read(MAX_EXPORT_BYTES + 1)
            if len(raw) > MAX_EXPORT_BYTES:
                _refuse(f"{shown} is more than {MAX_EXPORT_BYTES} bytes, more than an export may be; nothing imported")
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            _refuse(f"{shown}: not UTF-8 text (at byte {e.start}); an export is a YAML file; nothing imported")
        except OSError as e:
            _refuse(f"cannot read {shown}: {e.strerror or e}")
        errors: list = []
        found = load_export_text(text, shown, errors, [])
        if errors:
            for e in errors:
                err(str(e))
            _refuse(f"{shown}: not a valid export (problems above); nothing imported")
        if as_ is not None:
            if len(found) != 1:
                raise typer.BadParameter(f"--as renames one preset; {shown} holds {len(found)}")
            found[0].name = _name(as_)
        # refused whole, before any write
        plan = [(p, _placement(p.name, p.hash, None, force, "import")) for p in found]
        for p, how in plan:
            if how != "same":
                _write(p.name, p.values, None, backup=how == "replace")
        done = {"new": "imported", "same": "unchanged (it holds these very values)",
                "replace": "replaced (the old one kept as {}.yaml.bak)"}
        for p, how in plan:
            err(f"preset {p.name} {done[how].format(p.name)}")

    @presets_app.command("report")
    def report(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (the API's model)"),
               all_: bool = typer.Option(False, "-a", "--all", help="include finished jobs of any age")) -> None:
        """Your jobs by preset, with counts by state, marking the jobs whose preset has changed
        since they were submitted."""
        import json

        from xced.api.errors import XceError
        from xcecli import presets as store
        from xcecli.output import table

        jobs = ctx.obj.client().jobs_raw(all=all_).json()["jobs"]
        groups: dict[str, dict] = {}
        for j in jobs:
            meta = j.get("meta") if isinstance(j.get("meta"), dict) else {}
            pr = meta.get("preset") if isinstance(meta.get("preset"), dict) else None
            if pr is None or not isinstance(pr.get("name"), str):
                continue
            g = groups.get(pr["name"])
            if g is None:
                state = "ok"
                try:
                    now = store.load_fast(pr["name"]).hash
                except store.PresetMissing:
                    now, state = None, "deleted"
                except XceError:  # no longer valid, or a name no preset could have
                    now, state = None, "not valid"
                g = groups[pr["name"]] = {"name": pr["name"], "hash": now, "preset": state, "counts": {}, "jobs": []}
            changed = g["hash"] != pr.get("hash")
            g["counts"][j["state"]] = g["counts"].get(j["state"], 0) + 1
            g["jobs"].append({"job_id": j["job_id"], "state": j["state"], "hash": pr.get("hash"), "changed": changed})
        out = sorted(groups.values(), key=lambda g: g["name"])
        for g in out:
            g["changed"] = sum(1 for x in g["jobs"] if x["changed"])
        if as_json:
            print(json.dumps({"presets": out}, indent=2))
            return
        if not out:
            from xcecli.output import err

            err("no jobs submitted with --preset")
            return
        rows = []
        for g in out:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(g["counts"].items()))
            note = {"deleted": "preset deleted", "not valid": "the local preset is not valid now"}.get(g["preset"], "")
            changed = [str(x["job_id"]) for x in g["jobs"] if x["changed"]]
            rows.append([g["name"], len(g["jobs"]), counts,
                         (f"changed: {' '.join(changed)}" if changed else "-") + (f" ({note})" if note else "")])
        table(["PRESET", "JOBS", "STATES", "CHANGED SINCE SUBMIT"], rows)

    app.add_typer(presets_app, name="presets")


def _summary(values: dict | None, width: int = 60) -> str:
    """A preset's values on one line, as submit options a shell would take back:
    "-q gpu -n 4 -R 'rusage[gpu=1]'"; control characters written as escapes."""
    import shlex

    from xced.api.submit_options import spelling

    if not values:
        return "-"
    parts = []
    for k, v in values.items():
        flag = spelling(k)
        items = [f"{n}={x}" for n, x in v.items()] if isinstance(v, dict) else v if isinstance(v, list) else [v]
        parts += [f"{flag} {shlex.quote(x)}" for x in items]
    text = " ".join(parts)
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."
