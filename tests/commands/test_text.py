"""``commands.text``: counted nouns, tables and machine formats."""

from __future__ import annotations

import io
import json

import pytest
import yaml

from webhook.commands.text import plural, share_text, table, write_data


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 objects"), (1, "1 object"), (2, "2 objects"), (-1, "-1 objects")]
)
def test_plural(count: int, expected: str) -> None:
    assert plural(count, "object") == expected


def test_an_irregular_plural() -> None:
    assert plural(1, "class", "classes") == "1 class"
    assert plural(3, "class", "classes") == "3 classes"


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_data_round_trips_in_order(fmt: str) -> None:
    value = {"b": [1, {"c": None}], "a": "x"}
    out = io.StringIO()
    write_data(value, fmt, out)
    text = out.getvalue()
    loaded = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert loaded == value
    assert list(loaded) == ["b", "a"]  # keys keep their order
    assert text.endswith("\n")


def test_an_unknown_format_is_a_bug() -> None:
    with pytest.raises(ValueError, match="xml"):
        write_data({}, "xml", io.StringIO())


def test_a_table_aligns_its_columns_without_trailing_blanks() -> None:
    rows = [["NAME", "NODE", "NOTE"], ["a-long-name", "n", ""], ["b", "node-2", "x"]]
    assert table(rows) == "NAME         NODE    NOTE\na-long-name  n\nb            node-2  x"
    assert table(rows, "  ").splitlines() == ["  " + line for line in table(rows).splitlines()]


def test_share_text_marks_shares_and_what_they_consume() -> None:
    result = {"device": "gpu-0", "shareID": "x", "consumedCapacity": {"memory": "10Gi", "cores": "2"}}
    assert share_text(result) == " (share cores=2, memory=10Gi)"
    assert share_text({"device": "gpu-0", "shareID": "x"}) == " (share)"
    assert share_text({"device": "gpu-0"}) == ""
    assert share_text("junk") == ""


def test_binding_text_names_the_conditions_a_device_waits_for() -> None:
    from webhook.commands.text import binding_text

    assert binding_text({"bindingConditions": ["d/Attached", "d/Powered"]}) == (
        " (waits for binding conditions: d/Attached, d/Powered)"
    )
    assert binding_text({"bindingConditions": []}) == ""
    assert binding_text({"device": "x"}) == ""
    assert binding_text(None) == ""
