"""The real node runtime's binaries (build-runtime.sh, runtime_bins.py): the cache keys Python computes are
build.sh's, and the built binaries are the pinned releases and answer as they should. Nothing is started
(containerd is only asked for its default config).

Without the binaries (``make controlplane``) the binary tests skip, or fail when ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from .launcher import HERE, read_versions, source_key
from .runtime_bins import RuntimeBinaries, find_runtime, pause_key, runtime_releases

VERSIONS = read_versions()


def bash_function(script: Path, name: str) -> str:
    """One shell function's definition out of a script (build.sh runs when sourced, so it is cut out)."""
    lines = script.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}() {{"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return "\n".join(lines[start : end + 1])


def bash_source_key(module_dir: Path) -> str:
    script = f'{bash_function(HERE / "build.sh", "source_key")}\nsource_key "$1"'
    env = {**os.environ, "BUILD_RECIPE": VERSIONS["BUILD_RECIPE"]}
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(module_dir)], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    "module", ["containerd", "cni", *(f"kube-proxy-{minor}" for minor in runtime_releases())]
)
def test_python_keys_are_build_sh_keys(module: str) -> None:
    module_dir = HERE / "go" / module
    assert (module_dir / "go.mod").is_file()
    assert (module_dir / "go.sum").is_file()
    key = source_key(module_dir, VERSIONS["BUILD_RECIPE"])
    assert len(key) == 16
    assert bash_source_key(module_dir) == key


def test_python_pause_key_is_build_runtime_sh_key(tmp_path: Path) -> None:
    src = tmp_path / "pause.c"
    src.write_bytes(b"int main(void) { return 0; }\n\xff")
    script = f'BUILD_RECIPE=7; source "{HERE / "build-runtime.sh"}"; pause_key "$1" "$2"'
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(src), "v3.10.2-v1.37.2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == pause_key(src.read_bytes(), "v3.10.2-v1.37.2", "7")
    assert pause_key(src.read_bytes(), "v3.10.2-v1.37.2", "8") != pause_key(
        src.read_bytes(), "v3.10.2-v1.37.2", "7"
    )


def requires(module_dir: str, module: str, version: str) -> bool:
    """Whether a generated go.mod requires ``module`` at ``version`` (tidy may mark it indirect)."""
    text = (HERE / "go" / module_dir / "go.mod").read_text()
    return (
        re.search(rf"^\s*(require )?{re.escape(module)} v{re.escape(version)}( // indirect)?$", text, re.M)
        is not None
    )


def test_generated_modules_pin_versions_env() -> None:
    assert requires("containerd", "github.com/containerd/containerd/v2", VERSIONS["CONTAINERD"])
    assert requires("cni", "github.com/containernetworking/plugins", VERSIONS["CNI_PLUGINS"])
    assert not requires("cni", "github.com/containernetworking/plugins", "1.9.0")
    for minor in runtime_releases():
        assert requires(
            f"kube-proxy-{minor}", "k8s.io/kubernetes", VERSIONS["KUBE_" + minor.replace(".", "_")]
        )
        text = (HERE / f"go/kube-proxy-{minor}/go.mod").read_text()
        assert re.search(r"^\s*(tool )?k8s\.io/kubernetes/cmd/kube-proxy$", text, re.M)


def test_a_release_off_the_runtime_says_so() -> None:
    assert runtime_releases() == ("1.37", "1.35")
    assert find_runtime("1.36") == (
        "Kubernetes 1.36 does not run on the real runtime (RUNTIME_RELEASES in versions.env)"
    )


def test_an_empty_cache_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRAXR_CONTROLPLANE_CACHE", str(tmp_path))
    found = find_runtime("1.37")
    assert isinstance(found, str)
    assert found.startswith("the node runtime for Kubernetes v1.37.2 is not built: containerd: ")
    assert "run `make controlplane`" in found


def runtime(version: str) -> RuntimeBinaries:
    found = find_runtime(version)
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {found}")
        pytest.skip(found)
    return found


def output(*argv: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout + done.stderr


@pytest.mark.parametrize("minor", runtime_releases())
def test_kube_proxy_reports_its_release(minor: str) -> None:
    bins = runtime(minor)
    assert output(bins.kube_proxy, "--version").strip() == f"Kubernetes v{bins.version}"


def test_containerd_binaries_report_the_pin() -> None:
    bins = runtime("1.37")
    want = f"v{VERSIONS['CONTAINERD']}"
    assert output(bins.containerd, "--version").split()[:3] == [
        "containerd",
        "github.com/containerd/containerd/v2",
        want,
    ]
    assert output(bins.ctr, "--version").split()[:3] == ["ctr", "github.com/containerd/containerd/v2", want]
    assert f"Version:  {want}" in output(bins.shim, "-v")


def test_containerd_built_without_cgo_has_cri_overlayfs_and_the_runc_shim() -> None:
    bins = runtime("1.37")
    config = output(bins.containerd, "--config", "/dev/null", "config", "default")
    for plugin in (
        "'io.containerd.cri.v1.runtime'",
        "'io.containerd.cri.v1.images'",
        "'io.containerd.snapshotter.v1.overlayfs'",
        "'io.containerd.grpc.v1.cri'",
    ):
        assert f"[plugins.{plugin}]" in config, plugin
    assert "runtime_type = 'io.containerd.runc.v2'" in config
    assert "btrfs" not in config  # the one cgo-only plugin, left out by CGO_ENABLED=0


@pytest.mark.parametrize("plugin", ["bridge", "host-local", "loopback", "portmap"])
def test_cni_plugins_answer_version_over_cni(plugin: str) -> None:
    bins = runtime("1.37")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND": "VERSION"}
    answer = json.loads(
        subprocess.run(
            [str(bins.cni_dir / plugin)],
            input='{"cniVersion": "1.0.0"}',
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        ).stdout
    )
    assert answer["cniVersion"] == "1.1.0"
    assert {"0.4.0", "1.0.0", "1.1.0"} <= set(answer["supportedVersions"])
    about = subprocess.run(
        [str(bins.cni_dir / plugin)], capture_output=True, text=True, env={"PATH": env["PATH"]}, timeout=30
    )
    assert f"CNI {plugin} plugin v{VERSIONS['CNI_PLUGINS']}" in about.stderr


def test_pause_is_static_and_reports_its_version() -> None:
    bins = runtime("1.37")
    assert output(bins.pause, "-v").strip() == f"pause.c v3.10.2-v{VERSIONS['KUBE_1_37']}"
    assert b"/lib64/ld-linux" not in bins.pause.read_bytes()  # static: no program interpreter


def test_runc_is_installed() -> None:
    bins = runtime("1.37")
    assert output(bins.runc, "--version").startswith("runc version ")
