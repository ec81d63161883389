"""Checks for a compiled ClusterConfig handed to a running daemon (CFG-3).

`xceadmin build --apply` compiles the YAML files and sends the ClusterConfig; the
daemon parses it again with the strict models and runs these checks before it swaps
the config in, so a config that skipped `xceadmin build` (or was edited on the way)
is refused whole, never half-applied.

- `check_compiled(cfg)`: the cross-references the loader checks with file positions
  (default_queue, default_application (PROF-2: an undefined name is an error, never a
  fallback), unique queue and host names, profile selects that parse, task ranges; and
  of projects and roles, by the same rules `xceadmin build` uses
  (`xced.config.projects.reference_problems`): parents exist and come first,
  default_projects and default_project name projects, bindings name roles and projects,
  cluster-wide roles are bound at `/`, shares do not over-carve).
- `restart_only_changes(old, new)`: settings a live swap cannot honour (the listener,
  the mode, the cluster name, the host list), each needing a restart.
"""

from __future__ import annotations

from xced.model.config import ClusterConfig

__all__ = ["check_compiled", "restart_only_changes"]


def check_compiled(cfg: ClusterConfig) -> list[str]:
    """Every cross-reference problem of `cfg`, one sentence each saying what is wrong and
    what would be valid; [] when it may be applied. Never raises."""
    from xced.config.projects import reference_problems
    from xced.resreq import ResReqError, parse

    problems: list[str] = []
    names = [q.name for q in cfg.queues]
    if not names:
        problems.append("the config has no queue; queues.yaml needs at least one")
    for kind, seq in (("queue", names), ("host", [h.name for h in cfg.hosts])):
        seen: set[str] = set()
        for n in seq:
            if n in seen:
                problems.append(f"{kind} {n!r} is defined twice; names must be unique")
            seen.add(n)
    dq = cfg.settings.default_queue
    if dq and dq not in names:
        problems.append(f"default_queue {dq!r} is not a queue; valid: {', '.join(names) or '(no queues)'}")
    da = cfg.settings.default_application
    if da and da not in cfg.applications:
        problems.append(f"default_application {da!r} is not a profile; valid: {', '.join(sorted(cfg.applications))}"
                        " or an empty name for no profile (PROF-2)")
    for name, p in sorted(cfg.applications.items()):
        if p.name != name:
            problems.append(f"profile {name!r} carries the name {p.name!r}; they must agree")
        if p.select:
            try:
                parse(f"select[{p.select}]")
            except ResReqError as e:
                problems.append(f"profile {name}: select {p.select!r} is not valid resreq syntax: {e}")
        lim = p.limits
        if lim.task_min is not None and lim.task_max is not None and lim.task_min > lim.task_max:
            problems.append(f"profile {name}: task range {lim.task_min},{lim.task_max} has its minimum above its "
                            "maximum")
    problems.extend(p.message for p in reference_problems(cfg.projects, cfg.rbac,
                                                          default_project=cfg.settings.default_project)
                    if not p.warning)
    return problems


def restart_only_changes(old: ClusterConfig, new: ClusterConfig) -> list[str]:
    """What differs between `old` and `new` that only a daemon restart can take: one line
    each naming the setting; [] when the rest may be swapped in live."""
    def shown(what: str, v) -> str:
        if what == "listen":
            return "no TCP listener" if v.port is None else f"{v.host}:{v.port}"
        return repr(v)

    out = []
    for what in ("mode", "cluster_name", "listen"):
        a, b = getattr(old.settings, what), getattr(new.settings, what)
        if a != b:
            out.append(f"{what} changed from {shown(what, a)} to {shown(what, b)}")
    if old.hosts != new.hosts:
        out.append("hosts.yaml changed (hosts are read at start; workers that join are not affected)")
    return out
