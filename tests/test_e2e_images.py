"""The e2e test images' cache keys (e2e/images/keys.py) and the parts of the builder that need no buildah: a
changed input rebuilds, an unchanged one never does, and the Dockerfile takes its base as an argument."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from e2e.images import keys
from e2e.images.build import Builder, ImageError, _sizes, cache_dir, prune

ROOT = Path(__file__).resolve().parents[1]
BASE = "localhost/draxr-test-python:3.11-0123456789abcdef"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A stand-in for the repository: every input of draxr's image, plus files that are not."""
    root = tmp_path / "repo"
    for rel, text in {
        "Dockerfile": "FROM x\n",
        ".dockerignore": ".venv\n",
        "pyproject.toml": "[project]\n",
        "README.md": "# draxr\n",
        "webhook/__init__.py": "",
        "webhook/cli.py": "def main(): ...\n",
        "webhook/data/crd.yaml": "kind: X\n",
        "examples/kep-5004/pod.yaml": "kind: Pod\n",
        "tests/test_x.py": "def test(): ...\n",
        "e2e/local.py": "",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_key_is_the_same_for_the_same_inputs(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    assert keys.draxr_key(tree, BASE) == keys.draxr_key(copy, BASE)


def test_a_changed_webhook_source_changes_the_key(tree: Path) -> None:
    before = keys.draxr_key(tree, BASE)
    (tree / "webhook/cli.py").write_text("def main(): return 1\n")
    changed = keys.draxr_key(tree, BASE)
    assert changed != before
    (tree / "webhook/new.py").write_text("")
    assert keys.draxr_key(tree, BASE) not in (before, changed)


@pytest.mark.parametrize(
    "rel", ["Dockerfile", "pyproject.toml", "webhook/data/crd.yaml", "examples/kep-5004/pod.yaml"]
)
def test_every_input_is_in_the_key(tree: Path, rel: str) -> None:
    before = keys.draxr_key(tree, BASE)
    (tree / rel).write_text((tree / rel).read_text() + "# changed\n")
    assert keys.draxr_key(tree, BASE) != before


def test_what_the_image_does_not_read_leaves_the_key(tree: Path) -> None:
    before = keys.draxr_key(tree, BASE)
    (tree / "tests/test_x.py").write_text("def test(): assert 0\n")
    (tree / "e2e/local.py").write_text("x = 1\n")
    # Bytecode differs between checkouts of the same source.
    (tree / "webhook/__pycache__").mkdir()
    (tree / "webhook/__pycache__/cli.cpython-311.pyc").write_bytes(b"\0")
    assert keys.draxr_key(tree, BASE) == before


def test_another_base_changes_the_key(tree: Path) -> None:
    assert keys.draxr_key(tree, BASE) != keys.draxr_key(tree, BASE.replace("0123", "3210"))


def test_a_missing_input_says_which(tree: Path) -> None:
    shutil.rmtree(tree / "examples")
    with pytest.raises(FileNotFoundError, match="image input examples is missing"):
        keys.draxr_key(tree, BASE)


def test_the_keys_list_every_file_the_dockerfile_copies() -> None:
    copied: set[str] = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copied.update(w.rstrip("/") for w in words[1:-1])
    assert copied
    assert copied <= set(keys.DRAXR_INPUTS)
    assert re.fullmatch(r"[0-9a-f]{16}", keys.draxr_key(ROOT, BASE))


def test_the_base_keys_follow_their_packages_and_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    python, workload = keys.python_key(), keys.workload_key()
    assert keys.python_key() == python
    assert keys.python_ref(python) == f"localhost/draxr-test-python:3.11-{python}"
    monkeypatch.setattr(keys, "PYTHON_PACKAGES", (*keys.PYTHON_PACKAGES, "python3-yaml"))
    assert keys.python_key() != python
    assert keys.workload_key() == workload
    monkeypatch.setattr(keys, "SUITE", "trixie")
    assert keys.workload_key() != workload
    monkeypatch.setattr(keys, "RECIPE", keys.RECIPE + "x")
    assert keys.python_key() != python


def test_the_pause_key_is_the_binary(tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    pause.write_bytes(b"\x7fELF one")
    one = keys.pause_key(pause)
    pause.write_bytes(b"\x7fELF two")
    assert keys.pause_key(pause) != one


def test_a_pause_that_is_not_a_binary_is_refused(tmp_path: Path) -> None:
    builder = Builder(cache=tmp_path / "cache")
    with pytest.raises(ImageError, match="no such file"):
        builder.pause(tmp_path / "absent")
    script = tmp_path / "pause"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    with pytest.raises(ImageError, match="not an executable ELF binary"):
        builder.pause(script)


def test_the_cache_is_outside_the_clone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DRAXR_IMAGE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "draxr" / "images"
    monkeypatch.setenv("DRAXR_IMAGE_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_sizes_count_the_layers_files(tmp_path: Path) -> None:
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        _add(t, "bin/busybox", b"x" * 1000)
        _add(t, "etc/hostname", b"pod\n")
    archive = tmp_path / "image.tar"
    with tarfile.open(archive, "w") as t:
        _add(t, "manifest.json", json.dumps([{"Config": "c.json", "Layers": ["l/layer.tar"]}]).encode())
        _add(t, "l/layer.tar", layer.getvalue())
    gz, unpacked = _sizes(archive)
    assert unpacked == 1004
    assert 0 < gz < archive.stat().st_size


def test_the_dockerfile_takes_its_base_as_an_argument() -> None:
    lines = [ln for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln and not ln.startswith("#")]
    froms = [i for i, ln in enumerate(lines) if ln.startswith("FROM ")]
    assert lines[0] == "ARG BASE=python:3.11-slim"
    assert froms[0] > 0
    assert [lines[i].split()[1] for i in froms] == ["${BASE}", "${BASE}"]
    assert "USER 65532:65532" in lines
    assert 'ENTRYPOINT ["draxr"]' in lines


def test_make_test_leaves_the_image_builds_to_e2e_local() -> None:
    makefile = (ROOT / "Makefile").read_text()
    unit = makefile.split("\nunit:", 1)[1].split("\n\n", 1)[0]
    pytest_lines = [ln for ln in unit.splitlines() if "pytest" in ln]
    assert pytest_lines
    assert all("--ignore=e2e/images" in ln for ln in pytest_lines)
    e2e_local = makefile.split("\ne2e-local:", 1)[1].split("\n\n", 1)[0]
    assert "pytest -q e2e/images" in e2e_local


def test_the_cache_keeps_the_newest_tarballs_of_each_image(tmp_path: Path) -> None:
    for i, name in enumerate(["draxr-" + f"{n:016x}" for n in range(5)]):
        for suffix in (".tar", ".json"):
            (tmp_path / (name + suffix)).write_text("")
            os.utime(tmp_path / (name + suffix), ns=(i * 10**9, i * 10**9))
    (tmp_path / f"draxr-workload-{0:016x}.tar").write_text("")
    (tmp_path / f"draxr-test-python-3.11-{0:016x}.tar").write_text("")
    removed = prune(tmp_path, "draxr", keep=3)
    assert sorted(p.name for p in removed) == [f"draxr-{0:016x}.tar", f"draxr-{1:016x}.tar"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            *(f"draxr-{n:016x}{s}" for n in (2, 3, 4) for s in (".tar", ".json")),
            f"draxr-workload-{0:016x}.tar",
            f"draxr-test-python-3.11-{0:016x}.tar",
        ]
    )
    assert prune(tmp_path, "draxr-test-python", keep=0) == [tmp_path / f"draxr-test-python-3.11-{0:016x}.tar"]


def test_the_cli_refuses_a_bad_pause_before_building_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from e2e.images import __main__ as cli
    from e2e.images import build

    def no_build(self: Builder) -> None:
        raise AssertionError("built before checking --pause")

    monkeypatch.setattr(build, "missing_tools", list)
    monkeypatch.setattr(Builder, "python_base", no_build)
    assert cli.main(["--pause", str(tmp_path / "absent"), "--cache", str(tmp_path / "cache")]) == 1
    assert capsys.readouterr().err == f"error: --pause {tmp_path / 'absent'}: no such file\n"
