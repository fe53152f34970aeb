"""The one YAML loader refuses costly or malformed input with a located message and never quotes it."""

from __future__ import annotations

import time

import pytest

from fleetwave.api import yamlsafe


def _laughs(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*l{i - 1}"] * width)
        lines.append(f"l{i}: &l{i} [{refs}]")
    return "\n".join(lines)


def test_plain_documents_load_with_timestamps_kept_as_text() -> None:
    text = "a: 1\nwhen: 2025-01-02T03:04:05Z\nday: !!timestamp 2025-01-02\nb: [x, {c: d}]\n---\n---\nz: true"
    assert yamlsafe.load_all(text) == [
        {"a": 1, "when": "2025-01-02T03:04:05Z", "day": "2025-01-02", "b": ["x", {"c": "d"}]},
        None,
        {"z": True},
    ]


def test_merge_keys_and_a_few_aliases_still_work() -> None:
    text = "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\nagain: *b"
    assert yamlsafe.load(text) == {"base": {"x": 1}, "derived": {"x": 1, "y": 2}, "again": {"x": 1}}


def test_an_alias_bomb_is_refused_before_anything_walks_it() -> None:
    started = time.monotonic()
    with pytest.raises(yamlsafe.YamlError, match="expands to more than"):
        yamlsafe.load(_laughs(9), what="bomb.yaml")
    assert time.monotonic() - started < 5  # generous: the point is "not minutes"


def test_a_self_referencing_alias_is_refused() -> None:
    with pytest.raises(yamlsafe.YamlError, match="refers to the collection that contains it"):
        yamlsafe.load("a: &a [1, *a]")


def test_deep_nesting_is_refused_without_recursion_error() -> None:
    # Past 1,000 levels PyYAML >= 6.0.4's scanner refuses first (it reads flow brackets ahead).
    with pytest.raises(yamlsafe.YamlError, match=r"nested deeper than 64 levels|maximum nesting depth"):
        yamlsafe.load("[" * 5000 + "]" * 5000)
    with pytest.raises(yamlsafe.YamlError, match="nested deeper than 64 levels"):
        yamlsafe.load("[" * 100 + "]" * 100)
    nested = "".join(f"{'  ' * i}k:\n" for i in range(100))
    with pytest.raises(yamlsafe.YamlError, match="nested deeper than 64 levels"):
        yamlsafe.load(nested)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x: !!int abc", "cannot be read"),
        ("x: !!binary aGVsbG8=", "unsupported YAML tag"),
        ("x: !!python/object:os.system {}", "unsupported YAML tag"),
        ("x: !!set {a: null}", "unsupported YAML tag"),
        ("x: " + "9" * 4500, "an integer of 4500 digits"),
    ],
)
def test_tags_and_values_outside_the_core_schema_are_refused(text: str, expected: str) -> None:
    with pytest.raises(yamlsafe.YamlError, match=expected):
        yamlsafe.load(text)


def test_binary_and_oversized_input_is_refused() -> None:
    with pytest.raises(yamlsafe.YamlError, match="not UTF-8"):
        yamlsafe.load(b"a: \xff\xfe")
    with pytest.raises(yamlsafe.YamlError, match="NUL bytes"):
        yamlsafe.load("a: b\x00c")
    with pytest.raises(yamlsafe.YamlError, match="more than the limit"):
        yamlsafe.load("a: " + "x" * 2000, budget=yamlsafe.Budget(max_bytes=1000))


def test_syntax_errors_name_line_and_column_but_never_quote_the_input() -> None:
    secret = "s3cr3t-Tok3n"
    with pytest.raises(yamlsafe.YamlError) as caught:
        yamlsafe.load(f"data:\n  token: '{secret}\n  other: [", what="creds.yaml")
    message = str(caught.value)
    assert message.startswith("creds.yaml: invalid YAML at line")
    assert secret not in message


def test_load_refuses_several_documents() -> None:
    with pytest.raises(yamlsafe.YamlError, match="expected one YAML document, found 2"):
        yamlsafe.load("a: 1\n---\nb: 2")


@pytest.mark.parametrize(
    "text",
    [
        "token: *s3cr3t-value",
        "token: !s3cr3t-value x",
        "token: !!s3cr3t-value x",
        "token: [s3cr3t-value",
        "token: 's3cr3t-value",
        'token: "s3cr3t-value \\q"',
        "token: {s3cr3t-value: [}",
    ],
)
def test_errors_never_quote_the_input(text: str) -> None:
    with pytest.raises(yamlsafe.YamlError) as caught:
        yamlsafe.load(text, what="Secret fw/creds")
    message = str(caught.value)
    assert "s3cr3t" not in message
    assert message.startswith("Secret fw/creds: ")
    assert "line 1" in message or "line 2" in message


def test_a_document_with_more_values_than_the_budget_is_refused_by_the_prescan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Refused before anything is composed or constructed: the composer is never reached.
    def composed(*_: object) -> None:
        raise AssertionError("composed a document the prescan should have refused")

    monkeypatch.setattr(yamlsafe._Loader, "get_node", composed)
    text = "\n".join(f"- {i}" for i in range(2_000))
    with pytest.raises(yamlsafe.YamlError, match="more than 1000 values"):
        yamlsafe.load_all(text, budget=yamlsafe.Budget(max_nodes=1_000))


def test_a_document_without_aliases_is_not_measured_again_but_one_with_aliases_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured: list[object] = []
    real = yamlsafe._measure
    monkeypatch.setattr(yamlsafe, "_measure", lambda *a: measured.append(a) or real(*a))
    assert yamlsafe.load("a: [1, 2]") == {"a": [1, 2]}
    assert measured == []
    assert yamlsafe.load("a: &x [1, 2]\nb: *x") == {"a": [1, 2], "b": [1, 2]}
    assert len(measured) == 1
