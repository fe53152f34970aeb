"""docs/reference/ is generated from the API models (`tools/reference/render.py`) and kept in sync."""

from __future__ import annotations

from pathlib import Path

from fleetwave.api import reference
from fleetwave.api.models import ALL_KINDS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "reference"


def test_the_committed_reference_is_what_the_models_render() -> None:
    pages = reference.render_pages()
    committed = {p.name: p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")}
    stale = sorted(name for name in pages if committed.get(name) != pages[name])
    extra = sorted(set(committed) - set(pages))
    regenerate = "regenerate with `.venv/bin/python tools/reference/render.py`"
    assert not stale, f"{regenerate}: stale {stale}"
    assert not extra, f"{regenerate}: extra {extra}"


def test_the_index_lists_every_kind_once() -> None:
    listed = [kind for _, kinds in reference._GROUPS for kind in kinds]
    assert sorted(listed) == sorted(m.kind_name for m in ALL_KINDS)
    index = reference.index_page()
    for model in ALL_KINDS:
        assert f"]({reference.page_name(model.kind_name)})" in index


def test_a_page_lists_nested_fields_with_their_schema() -> None:
    by_name = {m.kind_name: m for m in ALL_KINDS}
    page = reference.kind_page(by_name["ClusterPromotion"])
    assert "| `spec.stages[].name` | string | yes |" in page
    assert "`spec.profileSpec.tier` | integer |  | default `100`; min 1 |" in page
    assert "Also served as `config.projectsveltos.io/v1beta1` `ClusterPromotion`" in page
