"""The web page's assets ship in the package and hold to the page's policy: nothing fetched from
elsewhere (works offline), no inline script or style (the CSP forbids them), no HTML built from
strings (names and messages are hostile input)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from fleetwave.ux import webapp

NAMES = ("index.html", *webapp.ASSETS)


def _read(name: str) -> str:
    return resources.files("fleetwave.ux").joinpath("web", name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_no_asset_reaches_outside_the_page_origin(name: str) -> None:
    text = _read(name)
    assert not re.search(r"(?i)\b(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text), f"{name} names an external URL"
    assert "@import" not in text


def test_the_page_has_its_token_slot_and_only_its_own_assets() -> None:
    page = _read("index.html")
    assert '<meta name="fleetwave-token" content="{{TOKEN}}">' in page
    assert re.findall(r'<script[^>]*src="([^"]+)"', page) == ["/static/app.js"]
    assert re.findall(r'<link[^>]*href="([^"]+)"', page) == ["/static/app.css"]
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", page), "inline event handler"
    assert not re.search(r"\sstyle\s*=", page), "inline style attribute"
    assert "<style" not in page
    assert 'lang="en"' in page


def test_the_script_never_parses_strings_as_html() -> None:
    script = _read("app.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
