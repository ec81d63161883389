"""CLI-1: the JSON Schemas in docs/json/ are generated from the API models; stale files fail."""

from __future__ import annotations

from pathlib import Path

from xced.api.schema import schemas

DOCS = Path(__file__).resolve().parents[2] / "docs" / "json"


def test_docs_json_is_current():
    want = schemas()
    have = {p.name: p.read_text() for p in DOCS.glob("*.schema.json")}
    stale = sorted(n for n in want if have.get(n) != want[n])
    extra = sorted(set(have) - set(want))
    assert not stale and not extra, (
        f"docs/json is stale (changed: {stale}, extra: {extra}); regenerate with `make docs-json`")


def test_every_listing_model_forbids_unknown_fields():
    from xced.api.models import PUBLISHED, SubmitRequest, JobAction

    for model in [*PUBLISHED.values(), SubmitRequest, JobAction]:
        assert model.model_config.get("extra") == "forbid", model.__name__
