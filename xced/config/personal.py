"""Writers of a TopDir's `config/`: the personal single-host cluster (made on the
first start of xced) and the commented skeleton of `xceadmin init DIR`.

Both describe this machine: one host named after `socket.gethostname()`, with
as many slots as CPUs this process may run on and its physical memory, and the
current user as the only admin. Both load without errors.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

from xced.config import templates
from xced.config.loader import CONFIG_DIR, HOSTS_FILE, NAME_RE, QUEUES_FILE, SETTINGS_FILE

__all__ = ["current_user", "local_host_facts", "write_personal_config", "write_skeleton"]

_PLAIN_SCALAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def current_user() -> str:
    """The name of the user this process runs as (the same name SO_PEERCRED
    identity maps to), falling back to the login environment."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        import getpass

        try:
            return getpass.getuser()
        except Exception:
            return f"uid{os.getuid()}"


def local_host_facts() -> tuple[str, int, int]:
    """(host name, slots, memory MB) of this machine."""
    import psutil

    name = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()) or "localhost"
    try:
        slots = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        slots = os.cpu_count() or 1
    memory_mb = psutil.virtual_memory().total // 2**20
    return name, max(slots, 1), max(int(memory_mb), 1)


def _scalar(text: str) -> str:
    """`text` as a YAML scalar that loads back as this string."""
    if _PLAIN_SCALAR_RE.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _comment_safe(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


def _write(topdir: Path, files: dict[str, str], overwrite: bool) -> list[Path]:
    config_dir = Path(topdir) / CONFIG_DIR
    targets = {config_dir / name: text for name, text in files.items()}
    if not overwrite:
        existing = [p for p in targets if p.exists()]
        if existing:
            raise FileExistsError(f"{existing[0]} exists already; not overwriting it")
    config_dir.mkdir(parents=True, exist_ok=True)
    for path, text in targets.items():
        path.parent.mkdir(mode=0o755, exist_ok=True)  # config/presets/ (PRE-3)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o644)  # D-7: the config is public; only its owner (and root) may change it
        os.replace(tmp, path)
    return list(targets)


def _values(topdir: Path) -> dict[str, str]:
    host, slots, memory_mb = local_host_facts()
    return {
        "topdir": _comment_safe(str(topdir)),
        "user": _scalar(current_user()),
        "host": _scalar(host),
        "slots": str(slots),
        "memory": str(memory_mb),
    }


def write_personal_config(topdir: Path, *, overwrite: bool = False) -> None:
    """Write `<topdir>/config/{xce,queues,hosts}.yaml` for a personal
    single-host cluster: mode production, cluster "personal", the current user
    as admin, one queue `normal`, this host. Raises FileExistsError rather than
    overwrite an existing file (unless `overwrite`)."""
    v = _values(Path(topdir))
    _write(
        Path(topdir),
        {
            SETTINGS_FILE: templates.PERSONAL_SETTINGS.substitute(v),
            QUEUES_FILE: templates.PERSONAL_QUEUES.substitute(v),
            HOSTS_FILE: templates.PERSONAL_HOSTS.substitute(v),
        },
        overwrite,
    )


def write_skeleton(topdir: Path, *, overwrite: bool = False) -> list[Path]:
    """Write the commented example config of `xceadmin init DIR`: every key of
    xce.yaml explained, two queues, this host. Returns the files written.
    Raises FileExistsError rather than overwrite an existing file."""
    topdir = Path(topdir)
    v = _values(topdir)
    base = topdir.absolute().name
    v["cluster_name"] = base if NAME_RE.match(base) and base.lower() not in _YAML_WORDS else "xce"
    v["cluster_name"] = _scalar(v["cluster_name"])
    return _write(
        topdir,
        {
            SETTINGS_FILE: templates.SKELETON_SETTINGS.substitute(v),
            QUEUES_FILE: templates.SKELETON_QUEUES.substitute(v),
            HOSTS_FILE: templates.SKELETON_HOSTS.substitute(v),
        },
        overwrite,
    )
