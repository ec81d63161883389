"""JSON Schemas of every `--json` output (CLI-1: stable, documented fields), generated from
the API models into docs/json/ so they cannot drift; a test fails when they are stale.

    python -m xced.api.schema docs/json      # or: make docs-json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def schemas() -> dict[str, str]:
    """File name -> schema text (pretty JSON, trailing newline) for each published model."""
    from xced.api.models import PUBLISHED

    out = {}
    for name, model in PUBLISHED.items():
        schema = model.model_json_schema(mode="serialization")
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def write(dest: Path) -> list[Path]:
    """Write every schema into `dest` (created if needed); remove stale *.schema.json files."""
    dest.mkdir(parents=True, exist_ok=True)
    files = schemas()
    for old in dest.glob("*.schema.json"):
        if old.name not in files:
            old.unlink()
    written = []
    for fname, text in files.items():
        p = dest / fname
        p.write_text(text)
        written.append(p)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/json")
    for p in write(target):
        print(p)
