"""YAML edited in place (``loader.roundtrip``): documents split as written, unchanged ones byte for
byte, comments and key order kept through JSON patches, indentation learnt from the document."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from webhook.loader.roundtrip import (
    DEFAULT_INDENT,
    RoundTripError,
    apply_patch,
    dump,
    guess_indent,
    parse,
    render,
    split_documents,
)

GPU = "/spec/containers/0/resources/requests/example.com~1gpu"


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        ("", []),
        ("# only a comment\n", []),
        ("a: 1\n", ["a: 1\n"]),
        ("a: 1\n---\nb: 2\n", ["a: 1\n", "---\nb: 2\n"]),
        ("# head\n---\na: 1\n", ["# head\n---\na: 1\n"]),
        ("a: 1\n---\n", ["a: 1\n", "---\n"]),
        ("--- # note\na: 1\n--- \nb: 2", ["--- # note\na: 1\n", "--- \nb: 2"]),
        ("a: 1\n...\n", None),  # document end markers are not followed
        ("%YAML 1.1\n---\na: 1\n", None),
    ],
)
def test_documents_are_split_as_written(text: str, segments: list[str] | None) -> None:
    assert split_documents(text) == segments
    if segments:
        assert "".join(segments) == text
        assert len(segments) == len(parse(text).docs)


def test_a_file_without_changes_is_its_text() -> None:
    text = "# c\napiVersion: v1   # odd spacing\nkind: Pod\n---\n{a: 1}\n"
    assert render(parse(text)) == text


def test_only_changed_documents_are_written_again() -> None:
    first = "# first\napiVersion: v1\nkind: ConfigMap\ndata: {k:   'v'}   # kept as it is\n"
    second = "---\n# second\nkind: Pod\nspec:\n    containers:\n    -   name: c\n"
    third = "--- # third\nkind: Node\nmetadata:\n  name:    n\n"
    f = parse(first + second + third)
    apply_patch(f.docs[1], [{"op": "add", "path": "/spec/nodeName", "value": "n"}])
    f.changed.add(1)
    out = render(f)
    assert out.startswith(first)
    assert out.endswith(third)
    middle = out[len(first) : -len(third)]
    assert middle == "---\n# second\nkind: Pod\nspec:\n    containers:\n    -   name: c\n    nodeName: n\n"


COMMENTED = """\
# The pod.
apiVersion: v1
kind: Pod
metadata:
  name: p  # its name
spec:
  containers:
  - name: a # the app
    resources:
      requests:
        # GPUs first
        example.com/gpu: 1   # one
      # about limits
      limits:   # the limits
        cpu: 1
        example.com/gpu: 1
      # after the limits
    image: x
  - name: b
    resources:
      limits:
        example.com/gpu: 1
        # between
        cpu: 2
# the end
"""


def _rewrite_like(doc: Any) -> None:
    apply_patch(
        doc,
        [
            {"op": "remove", "path": GPU},
            {"op": "remove", "path": "/spec/containers/0/resources/limits/example.com~1gpu"},
            {"op": "remove", "path": "/spec/containers/1/resources/limits/example.com~1gpu"},
            {
                "op": "add",
                "path": "/spec/containers/0/resources/claims",
                "value": [{"name": "x", "request": "d"}],
            },
            {
                "op": "add",
                "path": "/spec/resourceClaims",
                "value": [{"name": "x", "resourceClaimTemplateName": "t"}],
            },
            {"op": "add", "path": "/metadata/annotations", "value": {"draxr.io/rewritten": '{"t":["c",1]}'}},
        ],
    )


def test_comments_of_removed_entries_stay_where_they_were() -> None:
    f = parse(COMMENTED)
    _rewrite_like(f.docs[0])
    f.changed.add(0)
    out = render(f)
    assert out == (
        "# The pod.\n"
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: p  # its name\n"
        "  annotations:\n"
        '    draxr.io/rewritten: \'{"t":["c",1]}\'\n'
        "spec:\n"
        "  containers:\n"
        "  - name: a # the app\n"
        "    resources:\n"
        "      requests: {}\n"  # emptied: the comment above its entry moves below it
        "        # GPUs first\n"
        "      # about limits\n"
        "      limits:   # the limits\n"
        "        cpu: 1\n"
        "      # after the limits\n"
        "      claims:\n"
        "      - name: x\n"
        "        request: d\n"
        "    image: x\n"
        "  - name: b\n"
        "    resources:\n"
        "      limits:\n"
        "        # between\n"
        "        cpu: 2\n"
        "  resourceClaims:\n"
        "  - name: x\n"
        "    resourceClaimTemplateName: t\n"
        "# the end\n"  # the document's last comment stays last
    )
    assert yaml.safe_load(out)["spec"]["containers"][0]["resources"] == {
        "requests": {},
        "limits": {"cpu": 1},
        "claims": [{"name": "x", "request": "d"}],
    }


def test_a_comment_on_the_line_of_an_emptied_mapping_moves_below_it() -> None:
    text = "r:\n  limits:   # the limits\n    example.com/gpu: 1\n  other: 1\n"
    f = parse(text)
    apply_patch(f.docs[0], [{"op": "remove", "path": "/r/limits/example.com~1gpu"}])
    f.changed.add(0)
    assert render(f) == "r:\n  limits: {}\n  # the limits\n  other: 1\n"


def test_flow_style_and_quotes_are_kept() -> None:
    text = "r: {requests: {cpu: '1', example.com/gpu: \"1\"}}\nq: 'single'\n"
    f = parse(text)
    apply_patch(f.docs[0], [{"op": "remove", "path": "/r/requests/example.com~1gpu"}])
    f.changed.add(0)
    assert render(f) == "r: {requests: {cpu: '1'}}\nq: 'single'\n"


def test_patches_under_a_prefix_and_every_operation() -> None:
    f = parse("items:\n- spec:\n    a: 1\n    b: [x, y]\n")
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/a", "value": 2},
        {"op": "copy", "from": "/b", "path": "/c"},
        {"op": "move", "from": "/a", "path": "/d"},
        {"op": "add", "path": "/b/-", "value": "z"},
        {"op": "add", "path": "/b/0", "value": "w"},
    ]
    apply_patch(f.docs[0], ops, ["items", 0, "spec"])
    assert yaml.safe_load(dump(f.docs[0])) == {
        "items": [{"spec": {"b": ["w", "x", "y", "z"], "c": ["x", "y"], "d": 2}}]
    }
    with pytest.raises(KeyError):
        apply_patch(f.docs[0], [{"op": "remove", "path": "/nope"}], ["items", 0, "spec"])
    with pytest.raises(ValueError, match="unsupported JSON patch operation 'test'"):
        apply_patch(f.docs[0], [{"op": "test", "path": "/b", "value": 1}])


def test_plain_documents_take_patches_too() -> None:
    doc = {"spec": {"containers": [{"resources": {"requests": {"example.com/gpu": 1, "cpu": 1}}}]}}
    apply_patch(doc, [{"op": "remove", "path": GPU}])
    assert doc == {"spec": {"containers": [{"resources": {"requests": {"cpu": 1}}}]}}


@pytest.mark.parametrize(
    ("text", "indent"),
    [
        ("a:\n  b: 1\n  c:\n  - x\n", (2, 2, 0)),
        ("a:\n  b: 1\n  c:\n    - x\n", (2, 4, 2)),
        ("a:\n    b: 1\n    c:\n    -   x\n", (4, 4, 0)),
        ("- a: 1\n  b:\n    c: 2\n", (2, 2, 0)),
        ("a: 1\n", DEFAULT_INDENT),
        ("k: |\n  text:\n    more\n", (2, 2, 0)),
    ],
)
def test_indentation_is_learnt_from_the_document(text: str, indent: tuple[int, int, int]) -> None:
    assert guess_indent(text) == indent


def test_unreadable_yaml_names_the_document() -> None:
    with pytest.raises(RoundTripError) as e:
        parse("a: 1\n---\nb: [\n")
    assert e.value.index == 1
    assert e.value.message == "line 4, column 1: expected the node content, but found '<stream end>'"


def test_duplicate_keys_are_refused_as_kubectl_refuses_them() -> None:
    with pytest.raises(RoundTripError) as e:
        parse("a: 1\na: 2\n")
    assert e.value.index == 0
    assert e.value.message == 'line 2, column 1: found duplicate key "a" with value "2" (original value: "1")'


scalars = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.none(),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8),
)
keys = st.text("abcxyz/.-", min_size=1, max_size=6)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    doc=st.dictionaries(keys, trees, min_size=1, max_size=4), indent=st.sampled_from([(2, 2, 0), (2, 4, 2)])
)
@example(doc={"a": None, "aa": ["Off"]}, indent=(2, 4, 2))
def test_removing_a_key_changes_exactly_that_key(doc: dict[str, Any], indent: tuple[int, int, int]) -> None:
    text = yaml.safe_dump(doc, sort_keys=False) if indent == (2, 2, 0) else dump(doc, indent)
    f = parse(text)
    first = next(iter(doc))
    apply_patch(f.docs[0], [{"op": "remove", "path": "/" + first.replace("~", "~0").replace("/", "~1")}])
    f.changed.add(0)
    out = render(f)
    # Read as kubectl reads (YAML 1.1, where an unquoted ``Off`` is false), before and after.
    before = yaml.safe_load(text)
    expected = {k: v for k, v in before.items() if k != first}
    assert (yaml.safe_load(out) or {}) == expected


def test_a_yaml11_boolean_word_reads_the_same_before_and_after_an_edit() -> None:
    # Hypothesis found {'a': None, 'aa': ['Off']}: dumped unquoted (YAML 1.2), read back as false by
    # a YAML 1.1 reader. The edit must keep the word as it was written, so both readings survive.
    text = "a:\naa:\n  - Off\n  - 'on'\n"
    f = parse(text)
    apply_patch(f.docs[0], [{"op": "remove", "path": "/a"}])
    f.changed.add(0)
    out = render(f)
    assert out == "aa:\n  - Off\n  - 'on'\n"
    assert yaml.safe_load(out) == {"aa": [False, "on"]}
