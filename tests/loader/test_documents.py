"""The manifest loader: files, directories, multi-document YAML, Lists, JSON, errors, workloads."""

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.loader import (
    STDIN_SOURCE,
    Loaded,
    LoadError,
    expand_workloads,
    load_paths,
    load_text,
    read_input,
)

DATA = Path(__file__).parents[1] / "data" / "loader"
GOOD = DATA / "good"
BAD = DATA / "bad"


def summary(items: list[Loaded]) -> list[tuple[str, int, int | None, str, str]]:
    return [
        (
            Path(i.source).relative_to(GOOD).as_posix(),
            i.index,
            i.item,
            i.obj["kind"],
            i.obj["metadata"].get("name"),
        )
        for i in items
    ]


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# --- good input ------------------------------------------------------------------------------------


def test_directory_is_read_recursively_sorted_by_path() -> None:
    assert summary(load_paths([GOOD])) == [
        ("01-multi.yaml", 0, None, "DeviceClass", "gpu.example.com"),
        ("01-multi.yaml", 2, None, "Node", "node-a"),
        ("02-kubectl-get.yaml", 0, 0, "Pod", "web-0"),
        ("02-kubectl-get.yaml", 0, 1, "ResourceSlice", "node-a-gpu"),
        ("05-unknown-kind.yaml", 0, None, "Widget", "w"),
        ("nested/03-podlist.json", 0, 0, "Pod", "batch-0"),
        ("nested/03-podlist.json", 0, 1, "Pod", "batch-1"),
        ("nested/deeper/04-workloads.yml", 0, None, "Deployment", "demo"),
        ("nested/deeper/04-workloads.yml", 1, None, "Job", None),
    ]


def test_files_and_directories_mix_in_the_given_order() -> None:
    items = load_paths([GOOD / "05-unknown-kind.yaml", str(GOOD / "nested" / "deeper")])
    assert [i.obj["kind"] for i in items] == ["Widget", "Deployment", "Job"]
    assert items[0].source == str(GOOD / "05-unknown-kind.yaml")


def test_multi_document_yaml_skips_empty_documents_but_keeps_indexes() -> None:
    items = load_paths([GOOD / "01-multi.yaml"])
    assert [i.index for i in items] == [0, 2]
    assert items[1].obj["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "example.com/gpu": "0"}


def test_unquoted_timestamps_become_rfc3339_strings() -> None:
    dc = load_paths([GOOD / "01-multi.yaml"])[0].obj
    assert dc["metadata"]["creationTimestamp"] == "2024-05-01T10:00:00Z"


def test_kubectl_get_list_keeps_item_kinds() -> None:
    pod, rs = (i.obj for i in load_paths([GOOD / "02-kubectl-get.yaml"]))
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert (rs["apiVersion"], rs["kind"]) == ("resource.k8s.io/v1", "ResourceSlice")
    assert pod["metadata"]["uid"] == "0b7c6d3e-1111-4222-8333-944445555666"


def test_typed_list_items_get_apiversion_and_kind_from_the_list() -> None:
    items = load_paths([GOOD / "nested" / "03-podlist.json"])
    assert [(i.obj["apiVersion"], i.obj["kind"], i.item) for i in items] == [
        ("v1", "Pod", 0),
        ("v1", "Pod", 1),
    ]
    assert list(items[0].obj)[:2] == ["apiVersion", "kind"]
    assert items[0].obj["spec"]["containers"][0]["resources"]["requests"] == {"example.com/gpu": 2}


def test_unknown_kinds_are_kept_for_callers() -> None:
    [widget] = load_paths([GOOD / "05-unknown-kind.yaml"])
    assert widget.obj == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"anything": [1, 2, 3]},
    }


def test_yaml_keys_become_json_strings(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {2: a, true: b, null: c, 1.5: d}\n"
    [cm] = load_paths([write(tmp_path, "k.yaml", text)])
    assert cm.obj["data"] == {"2": "a", "true": "b", "null": "c", "1.5": "d"}


def test_json_and_whitespace_only_files(tmp_path: Path) -> None:
    write(tmp_path, "a.json", json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
    write(tmp_path, "b.json", "  \n")
    write(tmp_path, "c.yaml", "---\n# only a comment\n")
    assert [i.obj["metadata"]["name"] for i in load_paths([tmp_path])] == ["n"]


def test_list_with_null_items_is_empty(tmp_path: Path) -> None:
    path = write(tmp_path, "l.yaml", "apiVersion: v1\nkind: PodList\nitems:\n")
    assert load_paths([path]) == []


def test_generate_name_is_enough(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\n")
    assert load_paths([path])[0].obj["metadata"] == {"generateName": "p-"}


def test_resource_k8s_io_objects_come_out_in_v1_lists_included(tmp_path: Path) -> None:
    """``core.versions.to_v1`` on every object: alone, in a ``List`` and in a typed v1beta1 list."""
    device = "{name: d, basic: {attributes: {model: {string: a}}}}"
    slice_ = f"kind: ResourceSlice\nmetadata: {{name: s}}\nspec: {{driver: x, devices: [{device}]}}\n"
    request = "{name: r, deviceClassName: gpu, count: 2}"
    claim = f"kind: ResourceClaim\nmetadata: {{name: c}}\nspec: {{devices: {{requests: [{request}]}}}}\n"
    path = write(
        tmp_path,
        "beta.yaml",
        f"apiVersion: resource.k8s.io/v1beta1\n{slice_}---\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        f"- apiVersion: resource.k8s.io/v1beta2\n  kind: DeviceClass\n  metadata: {{name: k}}\n---\n"
        "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimList\n"
        f"items:\n- metadata: {{name: c}}\n  spec: {{devices: {{requests: [{request}]}}}}\n",
    )
    loaded = load_paths([path])
    assert [(i.index, i.item, i.obj["apiVersion"], i.obj["kind"]) for i in loaded] == [
        (0, None, "resource.k8s.io/v1", "ResourceSlice"),
        (1, 0, "resource.k8s.io/v1", "DeviceClass"),
        (2, 0, "resource.k8s.io/v1", "ResourceClaim"),
    ]
    assert loaded[0].obj["spec"]["devices"] == [{"name": "d", "attributes": {"model": {"string": "a"}}}]
    assert loaded[2].obj["spec"]["devices"]["requests"] == [
        {"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}
    ]
    # The same claim as a document of its own reads the same.
    [single] = load_paths([write(tmp_path, "c.yaml", f"apiVersion: resource.k8s.io/v1beta1\n{claim}")])
    assert single.obj["spec"] == loaded[2].obj["spec"]


# --- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing-kind.yaml", "document 2: kind: Required value"),
        ("missing-apiversion.yaml", "document 0: apiVersion: Required value"),
        (
            "not-a-mapping.yaml",
            "document 1: Invalid value: must be a mapping (a Kubernetes object), not a list",
        ),
        ("no-name.yaml", "document 0: metadata.name: Required value: name or generateName is required"),
        (
            "replicas-string.yaml",
            'document 0: spec.replicas: Invalid value: "3": must be an integer, not a string',
        ),
        (
            "quantity.yaml",
            'document 0: spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "one": '
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        ("list-item-kind.yaml", "document 0: items[1].kind: Required value"),
        (
            "containers-not-list.yaml",
            "document 0: spec.containers: Invalid value: must be a list, not a mapping",
        ),
        (
            "syntax.yaml",
            "document 0: line 6, column 5: did not find expected ',' or '}' (while parsing a flow mapping)",
        ),
        ("syntax.json", "document 0: line 4, column 28: Expecting property name enclosed in double quotes"),
    ],
)
def test_error_names_file_document_and_field(name: str, message: str) -> None:
    with pytest.raises(LoadError) as info:
        load_paths([BAD / name])
    assert str(info.value) == f"{BAD / name}: {message}"
    assert info.value.source == str(BAD / name)


def test_error_fields_are_exposed() -> None:
    with pytest.raises(LoadError) as info:
        load_paths([BAD / "missing-kind.yaml"])
    assert (info.value.index, info.value.field, info.value.message) == (2, "kind", "Required value")


def test_missing_path() -> None:
    with pytest.raises(LoadError, match=r"^nope\.yaml: no such file or directory$"):
        load_paths(["nope.yaml"])


def test_collecting_errors_keeps_loading() -> None:
    errors: list[LoadError] = []
    items = load_paths([BAD, "nope.yaml", GOOD / "05-unknown-kind.yaml"], errors=errors)
    assert len(errors) == len(list(BAD.iterdir())) + 1
    assert [Path(e.source).name for e in errors][:3] == [
        "containers-not-list.yaml",
        "list-item-kind.yaml",
        "missing-apiversion.yaml",
    ]
    # Good documents around the bad ones still load, the good file after them too.
    assert [(Path(i.source).name, i.index, i.item) for i in items] == [
        ("list-item-kind.yaml", 0, 0),
        ("missing-kind.yaml", 0, None),
        ("missing-kind.yaml", 1, None),
        ("not-a-mapping.yaml", 0, None),
        ("05-unknown-kind.yaml", 0, None),
    ]


def test_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", b"kind: \xff\xfe\n")
    with pytest.raises(LoadError, match=r"x\.yaml: not UTF-8 text \(byte 6\)$"):
        load_paths([path])


def test_yaml_reader_error_has_no_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "x.yaml", "kind: a\x00b\n")
    with pytest.raises(LoadError, match=r"x\.yaml: document 0: .*unacceptable character"):
        load_paths([path])


def test_alias_bomb_and_self_reference_are_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 8)]
    bomb = write(tmp_path, "bomb.yaml", "apiVersion: v1\nkind: X\nmetadata: {name: b}\n" + "\n".join(lines))
    with pytest.raises(LoadError, match="document holds more than"):
        load_paths([bomb])
    loop = write(tmp_path, "loop.yaml", "apiVersion: v1\nkind: X\nmetadata: {name: b}\nspec: &s [*s]\n")
    with pytest.raises(LoadError, match="nests deeper than"):
        load_paths([loop])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {x: .nan}\n", "nan is not a JSON number"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {? [a]: b}\n", "found unhashable key"),
        ("apiVersion: 1\nkind: Pod\n", "apiVersion: Invalid value: 1: must be a string, not an integer"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {a: 1}}\n",
            "metadata.labels[a]: Invalid value: 1",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: {a: b}\n",
            "items: Invalid value: must be a list, not a mapping",
        ),
        ("apiVersion: v1\nkind: List\nitems: [5]\n", "items[0]: Invalid value: 5: must be a mapping"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: -1}\n",
            "greater than or equal",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: x}}\n",
            "allocatable[cpu]",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {priority: true}\n",
            "spec.priority: Invalid",
        ),
        ("!!python/object:os.system\n", "could not determine a constructor"),
    ],
)
def test_more_error_paths(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "x.yaml", text)
    with pytest.raises(LoadError, match=r"x\.yaml: document 0: ") as info:
        load_paths([path])
    assert message in str(info.value)


def test_json_rejects_nan(tmp_path: Path) -> None:
    path = write(tmp_path, "x.json", '{"apiVersion": "v1", "kind": "Pod", "x": NaN}')
    with pytest.raises(LoadError, match=r"x\.json: document 0: unreadable value: NaN is not valid JSON"):
        load_paths([path])


# --- fuzz ------------------------------------------------------------------------------------------


def check_outcome(path: Path) -> bool:
    """Loading yields well-typed objects or a LoadError naming the file; nothing else escapes.

    Returns whether objects were loaded.
    """
    error: LoadError | None = None
    items: list[Loaded] = []
    try:
        items = load_paths([path])
    except LoadError as e:
        error = e
    if error is not None:
        assert str(error).startswith(str(path))
        return False
    for item in items:
        assert isinstance(item.obj, dict)
        assert isinstance(item.obj["apiVersion"], str)
        assert isinstance(item.obj["kind"], str)
        assert item.source == str(path)
        json.dumps(item.obj)  # plain JSON
    expand_workloads([i.obj for i in items])
    return bool(items)


_fuzz = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_fuzz
@given(st.binary(max_size=300), st.sampled_from(["x.yaml", "x.json"]))
def test_fuzz_arbitrary_bytes(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        check_outcome(path)


FIXTURE_TEXTS = [p.read_text() for p in sorted(DATA.rglob("*")) if p.suffix in (".yaml", ".yml", ".json")]


@st.composite
def mutated_fixture(draw: st.DrawFn) -> str:
    """A fixture file with a few characters inserted or deleted somewhere."""
    text = draw(st.sampled_from(FIXTURE_TEXTS))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        pos = draw(st.integers(min_value=0, max_value=len(text)))
        cut = draw(st.integers(min_value=0, max_value=4))
        insert = draw(
            st.sampled_from(["", " ", "\n", "-", ":", "[", "{", "'", "&a ", "*a", "---\n"])
            | st.text(max_size=3)
        )
        text = text[:pos] + insert + text[pos + cut :]
    return text


@_fuzz
@given(mutated_fixture())
def test_fuzz_mutated_manifests(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        check_outcome(path)


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=15,
)


def mostly(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, any JSON-like value otherwise."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda i: strategy if i else json_like)


count_st = st.integers(min_value=-1, max_value=3)
container_like = st.fixed_dictionaries(
    {"name": mostly(st.just("c"))},
    optional={
        "resources": mostly(st.fixed_dictionaries({"requests": mostly(st.just({"example.com/gpu": "1"}))}))
    },
)
spec_like = st.fixed_dictionaries(
    {},
    optional={
        "replicas": mostly(count_st),
        "parallelism": mostly(count_st),
        "containers": mostly(st.lists(mostly(container_like), max_size=2)),
        "template": mostly(st.fixed_dictionaries({"spec": mostly(st.fixed_dictionaries({}))})),
    },
)
object_like = st.fixed_dictionaries(
    {
        "apiVersion": mostly(st.sampled_from(["v1", "apps/v1", "batch/v1"])),
        "kind": mostly(st.sampled_from(["Pod", "Node", "Deployment", "Job", "List", "PodList"])),
        "metadata": mostly(st.fixed_dictionaries({"name": mostly(st.just("x"))})),
    },
    optional={
        "spec": mostly(spec_like),
        "items": mostly(st.lists(json_like, max_size=3)),
    },
)


@_fuzz
@given(st.lists(mostly(object_like), max_size=2), st.booleans())
def test_fuzz_json_like_documents(docs: list[Any], as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if as_json:
            path = Path(tmp) / "x.json"
            path.write_text(json.dumps(docs[0] if docs else {}), encoding="utf-8", errors="surrogatepass")
        else:
            path = Path(tmp) / "x.yaml"
            path.write_text(yaml.safe_dump_all(docs), encoding="utf-8", errors="surrogatepass")
        check_outcome(path)


# --- standard input, the raw form --------------------------------------------------------------------


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_dash_reads_standard_input_yaml_or_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stdin(monkeypatch, b"apiVersion: v1\nkind: Node\nmetadata: {name: from-stdin}\n")
    f = write(tmp_path, "a.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: from-file}\n")
    items = load_paths([f, "-"])
    assert [(i.source, i.obj["metadata"]["name"]) for i in items] == [
        (str(f), "from-file"),
        (STDIN_SOURCE, "from-stdin"),
    ]
    _stdin(monkeypatch, b' {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "j"}, "x": NaN}')
    with pytest.raises(LoadError) as e:
        load_paths(["-"])
    assert str(e.value) == "<stdin>: document 0: unreadable value: NaN is not valid JSON"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "<stdin>: not UTF-8 text (byte 0)"),
        (b"kind: [", "<stdin>: document 0: line 2, column 1: did not find expected node content"),
    ],
)
def test_unreadable_standard_input(monkeypatch: pytest.MonkeyPatch, data: bytes, message: str) -> None:
    _stdin(monkeypatch, data)
    with pytest.raises(LoadError) as e:
        load_paths(["-"])
    assert str(e.value).startswith(message)


def test_standard_input_closed_or_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.TextIOWrapper(io.BytesIO(b""))
    closed.close()
    monkeypatch.setattr("sys.stdin", closed)
    with pytest.raises(LoadError, match=r"^<stdin>: cannot read: "):
        load_paths(["-"])
    monkeypatch.setattr("sys.stdin", None)
    with pytest.raises(LoadError, match=r"^<stdin>: cannot read: there is no standard input$"):
        load_paths(["-"])


def test_standard_input_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, b"")
    with pytest.raises(LoadError) as e:
        load_paths(["-", "-"])
    assert str(e.value) == "<stdin>: standard input (-) can be read only once"
    errors: list[LoadError] = []
    _stdin(monkeypatch, b"apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    assert len(load_paths(["-", "-"], errors=errors)) == 1
    assert len(errors) == 1


def test_the_raw_form_is_the_object_as_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: k}\n---\n"
        "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p}\n",
    )
    dc, pod = load_paths([path])
    assert dc.obj["apiVersion"] == "resource.k8s.io/v1"
    assert dc.raw == {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "DeviceClass",
        "metadata": {"name": "k"},
    }
    assert pod.raw == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    source, text, is_json = read_input(path)
    assert (source, is_json) == (str(path), False)
    assert load_text(text, source) == [dc, pod]
