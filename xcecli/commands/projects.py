"""`xcecli projects` (PRJ-8, PRJ-6, PRJ-7): the project tree the caller may see, with each
project's share (resolved against the hosts present now), quota, use and pending jobs."""

from __future__ import annotations

import typer

#: how resources are named in a line, in this order; others follow by name
_ORDER = ("slots", "mem_mb")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def amounts(d: dict | None) -> str:
    """{"slots": 32, "mem_mb": 4096, "gpu": 2} -> "32 slots, 4096 MB, 2 gpu"; "-" for none."""
    if not d:
        return "-"
    keys = [k for k in _ORDER if k in d] + sorted(k for k in d if k not in _ORDER)
    return ", ".join(f"{_num(d[k])} MB" if k == "mem_mb" else f"{_num(d[k])} {k}" for k in keys)


def line(p: dict) -> str:
    """One project's line of the tree: its name, share, quota, member quota, use now, pending."""
    parts = [f"[bold]{p['path'].rsplit('/', 1)[-1]}[/bold]"]
    share = p.get("share") or {}
    if share:
        capped = p.get("capped") or []
        parts.append(f"share {amounts(share)}" + (f" (capped at the parent's share: {', '.join(capped)})"
                                                  if capped else ""))
    elif p.get("draws_from"):
        src = p["draws_from"]
        parts.append("share: from the cluster's unassigned part" if src == "/" else f"share: from {src}'s unassigned part")
    if p.get("quota"):
        parts.append(f"quota {amounts(p['quota'])}")
    if p.get("member_quota"):
        parts.append(f"per member {amounts(p['member_quota'])}")
    use = {k: v for k, v in (p.get("use") or {}).items() if v}
    parts.append(f"use {amounts(use) if use else 'none'}")
    parts.append(f"pending {p.get('pending', 0)}")
    return "  ".join(parts)


def register(app: typer.Typer) -> None:
    @app.command()
    def projects(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="the same data as JSON")) -> None:
        """Show the projects you may see (PRJ-8) as a tree: share, quota, use now, pending jobs."""
        import sys

        res = ctx.obj.client().request("GET", "/projects")
        if as_json:
            sys.stdout.buffer.write(res.body + b"\n")
            return
        items = res.json()["projects"]
        from rich.console import Console
        from rich.tree import Tree

        if not items:
            from xcecli.output import err

            err("no projects to show: the cluster is in open mode (no projects.yaml), or you belong to none")
            return
        root = Tree("[bold]cluster[/bold]")
        nodes: dict[str, Tree] = {}
        for p in sorted(items, key=lambda p: p["path"].count("/")):
            parent = p["path"].rsplit("/", 1)[0]
            # a project whose parent the caller may not see hangs from the root under its full path
            at = nodes.get(parent, root)
            label = line(p) if parent in nodes or not parent else line(p).replace(
                f"[bold]{p['path'].rsplit('/', 1)[-1]}[/bold]", f"[bold]{p['path']}[/bold]", 1)
            nodes[p["path"]] = at.add(label)
        console = Console(highlight=False)
        if not console.is_terminal:  # in a pipe: whole lines, never cut at 80 columns
            console = Console(highlight=False, width=100_000)
        console.print(root, crop=False)
