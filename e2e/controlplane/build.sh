#!/usr/bin/env bash
# Builds the e2e cluster's binaries from Go modules, at the versions pinned in versions.env: etcd; for
# each Kubernetes release kube-apiserver, kube-controller-manager, kube-scheduler and kubelet; and
# draxr's own node parts (go/nodes: fakecri, dradriver, deviceplugin); the CEL oracle (go/celoracle:
# upstream's DRA CEL compiler as kube-scheduler calls it, for bench/cel_differential.py); then the real
# node runtime: containerd, ctr and containerd-shim-runc-v2 (go/containerd), the CNI plugins bridge,
# host-local, loopback and portmap (go/cni), kube-proxy for each of RUNTIME_RELEASES
# (go/kube-proxy-<minor>) and the pause binary (gcc, from k8s.io/kubernetes's
# build/pause/linux/pause.c). runc comes from Debian's package.
#
#   e2e/controlplane/build.sh                 build whatever is missing (seconds when everything is cached)
#   e2e/controlplane/build.sh 1.37 1.36       only these releases (etcd, the node parts and the CEL oracle always)
#   e2e/controlplane/build.sh --regen         regenerate go/*/go.mod and go.sum from versions.env, then build
#   e2e/controlplane/build.sh --runtime-only  only the node runtime (with releases: only their kube-proxy)
#
# Binaries are cached outside the clone, in ${DRAXR_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/draxr/controlplane}
# /bin/<what>-<key>-<go version>/, where <key> hashes BUILD_RECIPE (versions.env) with the module's
# go.mod and go.sum (and, for go/nodes and go/celoracle, their Go sources): a new clone finds what an
# older one built, and a changed pin, source or recipe builds anew. launcher.py computes the same key
# (source_key), and runtime_bins.py for the runtime's binaries (pause: bin/pause-v<tag>-<key of
# recipe + pause.c>-gcc<version>/).
#
# Each Kubernetes release gets a tiny Go module (go/k8s-<minor>/) that requires k8s.io/kubernetes and
# replaces every staging module k8s.io/<name> with its published v0.<minor>.<patch>: k8s.io/kubernetes's
# own go.mod requires them as v0.0.0 with local replaces, which do not apply to a dependent module.
# The go.mod files are generated from versions.env and committed with their go.sum (which pins the
# build); a pin or tool list that no longer matches its go.mod regenerates it (that needs the module proxy).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${DRAXR_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/draxr/controlplane}"
START=$SECONDS
KUBE_TOOLS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
NODE_TOOLS=(fakecri dradriver deviceplugin)

say() { printf '[controlplane] %s\n' "$*"; }
die() { printf '[controlplane] error: %s\n' "$*" >&2; exit "${2:-1}"; }
elapsed() { printf '%ss' "$((SECONDS - ${1:-$START}))"; }

REGEN=0
RUNTIME_ONLY=0
ONLY=()
for arg in "$@"; do
    case "$arg" in
        --regen) REGEN=1 ;;
        --runtime-only) RUNTIME_ONLY=1 ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        1.[0-9]*) ONLY+=("$arg") ;;
        *) die "unknown argument: $arg (usage: build.sh [--regen] [--runtime-only] [1.34 1.35 ...])" 2 ;;
    esac
done

command -v go >/dev/null 2>&1 || die "go is not on PATH: install Go >= 1.26 (https://go.dev/dl) to build the control plane"

# shellcheck source=versions.env
source "$HERE/versions.env"
: "${ETCD:?versions.env sets no ETCD}" "${BUILD_RECIPE:?versions.env sets no BUILD_RECIPE}"
: "${CONTAINERD:?versions.env sets no CONTAINERD}" "${CNI_PLUGINS:?versions.env sets no CNI_PLUGINS}"
: "${RUNTIME_RELEASES:?versions.env sets no RUNTIME_RELEASES}" "${PAUSE_KUBE:?versions.env sets no PAUSE_KUBE}"
RELEASES=()
for key in $(compgen -v | grep -E '^KUBE_1_[0-9]+$' | sort -t_ -k3 -n); do
    minor="1.${key#KUBE_1_}"
    if [ "${#ONLY[@]}" = 0 ] || [[ " ${ONLY[*]} " == *" $minor "* ]]; then RELEASES+=("$minor"); fi
done
for want in "${ONLY[@]}"; do
    [[ " ${RELEASES[*]} " == *" $want "* ]] || die "versions.env pins no Kubernetes $want (no KUBE_${want//./_})" 2
done

export CGO_ENABLED=0          # static binaries, as the Kubernetes release builds them; no C compiler needed
export GOFLAGS="-mod=readonly"
export GOWORK=off
GOVERSION="$(go env GOVERSION)"
LOG="$CACHE/logs"
mkdir -p "$LOG"

# Runs "$@" with its output in a log; on failure prints the log's tail and stops. A failure that looks like
# the network (the module proxy, DNS, TLS) gets one clear line first.
run_logged() {
    local what="$1"; shift
    local log="$LOG/$what.log"
    if ! "$@" >"$log" 2>&1; then
        if grep -qiE 'module lookup disabled|dial tcp|no such host|i/o timeout|connection refused|TLS handshake|proxy.golang.org|unrecognized import path|: 403 Forbidden|: 404 Not Found|Get "https?://' "$log"; then
            printf '[controlplane] error: %s: the Go module proxy (%s) is unreachable or lacks a module: %s\n' \
                "$what" "$(go env GOPROXY)" "$(grep -m1 -iE 'module lookup disabled|dial tcp|no such host|timeout|refused|TLS|403|404|Get "' "$log")" >&2
            exit 3
        fi
        printf '[controlplane] error: %s failed (full log: %s); its last lines:\n' "$what" "$log" >&2
        tail -n 25 "$log" >&2
        exit 1
    fi
}

# The version a generated go.mod requires of a module, or nothing.
required_version() {  # <go.mod> <module path>
    [ -f "$1" ] && awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1" || true
}

# Whether a generated go.mod names every tool.
has_tools() {  # <go.mod> <tools...>
    local mod="$1" t; shift
    [ -f "$mod" ] || return 1
    for t in "$@"; do grep -qE "^[[:space:]]*(tool )?k8s.io/kubernetes/cmd/$t\$" "$mod" || return 1; done
}

# The cache key of a module's build: BUILD_RECIPE, go.mod, go.sum and the module's own Go sources (not
# its tests). launcher.py's source_key computes the same bytes.
source_key() {  # <module dir>
    local dir="$1" f
    {
        printf 'draxr-controlplane recipe=%s\n' "$BUILD_RECIPE"
        (cd "$dir" && find . -type f \( -name go.mod -o -name go.sum -o \( -name '*.go' ! -name '*_test.go' \) \) | LC_ALL=C sort) |
            while read -r f; do printf '== %s\n' "$f"; cat "$dir/$f"; done
    } | sha256sum | cut -c1-16
}

# Writes go/k8s-<minor>/go.mod for k8s.io/kubernetes v<version> and tidies it (writes go.sum).
regen_kube_module() {  # <dir> <version> <tools...>
    local dir="$1" ver="$2"; shift 2
    local t0=$SECONDS kmod staging godirective godebug
    say "generating $(basename "$dir")/go.mod for k8s.io/kubernetes v$ver ..."
    mkdir -p "$dir"
    # The release's own go.mod names its staging modules (replace k8s.io/x => ./staging/src/k8s.io/x).
    run_logged "download-kubernetes-$ver" bash -c "cd '$CACHE' && GOFLAGS= go mod download -json k8s.io/kubernetes@v$ver >'$LOG/kubernetes-$ver.json'"
    kmod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$LOG/kubernetes-$ver.json")"
    [ -f "$kmod" ] || die "no go.mod for k8s.io/kubernetes v$ver in the module cache"
    staging="$(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$kmod" | sort -u)"
    [ -n "$staging" ] || die "k8s.io/kubernetes v$ver's go.mod names no staging modules"
    godirective="$(awk '$1 == "go" { print $2; exit }' "$kmod")"
    godebug="$(awk '$1 == "godebug" { $1 = ""; sub(/^ /, ""); print; exit }' "$kmod")"
    local staging_ver="v0.${ver#1.}"
    {
        echo "// Generated by e2e/controlplane/build.sh from versions.env: do not edit; run build.sh --regen."
        echo "module draxr.invalid/e2e/controlplane/$(basename "$dir")"
        echo
        echo "go $godirective"
        [ -n "$godebug" ] && { echo; echo "godebug $godebug"; }
        echo
        echo "tool ("
        for t in "$@"; do echo "	k8s.io/kubernetes/cmd/$t"; done
        echo ")"
        echo
        echo "require k8s.io/kubernetes v$ver"
        echo
        echo "replace ("
        for m in $staging; do echo "	$m => $m $staging_ver"; done
        echo ")"
    } >"$dir/go.mod"
    rm -f "$dir/go.sum"
    run_logged "tidy-$(basename "$dir")" bash -c "cd '$dir' && GOFLAGS=-mod=mod go mod tidy"
    say "generated $(basename "$dir")/go.mod ($(wc -w <<<"$staging") staging modules at $staging_ver) in $(elapsed "$t0")"
}

regen_etcd_module() {  # <dir> <version>
    local dir="$1" ver="$2" t0=$SECONDS
    say "generating $(basename "$dir")/go.mod for go.etcd.io/etcd/server/v3 v$ver ..."
    mkdir -p "$dir"
    {
        echo "// Generated by e2e/controlplane/build.sh from versions.env: do not edit; run build.sh --regen."
        echo "module draxr.invalid/e2e/controlplane/etcd"
        echo
        echo "go 1.24.0"
        echo
        echo "tool go.etcd.io/etcd/server/v3"
        echo
        echo "require go.etcd.io/etcd/server/v3 v$ver"
    } >"$dir/go.mod"
    rm -f "$dir/go.sum"
    run_logged "tidy-etcd" bash -c "cd '$dir' && GOFLAGS=-mod=mod go mod tidy"
    say "generated etcd/go.mod in $(elapsed "$t0")"
}

# Downloads (or finds in the module cache) the modules that provide the packages of the binaries to
# build; fails with one line when the module proxy cannot be reached.
download() {  # <dir> <packages...>
    local dir="$1" t0=$SECONDS; shift
    say "fetching Go modules for $(basename "$dir") ..."
    run_logged "download-$(basename "$dir")" bash -c "cd '$dir' && go list -deps $* >/dev/null"
    say "Go modules for $(basename "$dir") ready in $(elapsed "$t0")"
}

build_binary() {  # <module dir> <out dir> <name> <package> <label> <ldflags>
    local dir="$1" out="$2" name="$3" pkg="$4" label="$5" ldflags="$6" t0=$SECONDS
    if [ -x "$out/$name" ]; then
        say "$name $label is built ($out/$name)"
        return
    fi
    say "building $name $label ..."
    mkdir -p "$out"
    # Built beside its final name and moved into place, so a killed build never leaves a binary behind.
    run_logged "build-$name-$label" bash -c "cd '$dir' && go build -trimpath -ldflags '$ldflags' -o '$out/.$name.tmp' '$pkg'"
    mv -f "$out/.$name.tmp" "$out/$name"
    say "built $name $label in $(elapsed "$t0") ($(du -h "$out/$name" | cut -f1))"
}

# Records how a cache directory's binaries were built (for a reader; the key is in its name).
write_manifest() {  # <out dir> <module dir> <ldflags>
    mkdir -p "$1"
    printf '{"go": "%s", "recipe": "%s", "module": "%s", "ldflags": "%s"}\n' \
        "$GOVERSION" "$BUILD_RECIPE" "${2#"$HERE"/}" "$3" >"$1/build.json"
}

# -X flags for k8s.io/component-base/version and k8s.io/client-go/pkg/version, as hack/lib/version.sh
# sets them: the apiserver derives its binary version (and so feature-gate emulation) from gitVersion,
# and the kubelet reports it as the Node's kubeletVersion.
kube_ldflags() {  # <version>
    local ver="$1" info commit date major minor
    info="$LOG/kubernetes-$ver.json"
    [ -f "$info" ] || run_logged "download-kubernetes-$ver" bash -c "cd '$CACHE' && GOFLAGS= go mod download -json k8s.io/kubernetes@v$ver >'$info'"
    # The module proxy records the release's time but not its commit.
    local infofile
    infofile="$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p' "$info")"
    commit="$(sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$infofile")"
    date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$infofile")"
    major="${ver%%.*}"; minor="${ver#*.}"; minor="${minor%%.*}"
    local flags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=v$ver -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        flags+=" -X $pkg.gitCommit=${commit:-unknown} -X $pkg.gitTreeState=clean -X $pkg.buildDate=${date:-1970-01-01T00:00:00Z}"
    done
    echo "$flags"
}

build_kube() {  # <minor, e.g. 1.35> <version>
    local minor="$1" ver="$2" dir="$HERE/go/k8s-$1" missing=0 b out
    if [ "$REGEN" = 1 ] || [ "$(required_version "$dir/go.mod" k8s.io/kubernetes)" != "v$ver" ] ||
        [ ! -f "$dir/go.sum" ] || ! has_tools "$dir/go.mod" "${KUBE_TOOLS[@]}"; then
        regen_kube_module "$dir" "$ver" "${KUBE_TOOLS[@]}"
    fi
    out="$CACHE/bin/k8s-v$ver-$(source_key "$dir")-$GOVERSION"
    for b in "${KUBE_TOOLS[@]}"; do [ -x "$out/$b" ] || missing=1; done
    if [ "$missing" = 0 ]; then
        say "Kubernetes v$ver: ${KUBE_TOOLS[*]} built ($out)"
        return
    fi
    download "$dir" "${KUBE_TOOLS[@]/#/k8s.io/kubernetes/cmd/}"
    local ldflags
    ldflags="$(kube_ldflags "$ver")"
    write_manifest "$out" "$dir" "$ldflags"
    for b in "${KUBE_TOOLS[@]}"; do
        build_binary "$dir" "$out" "$b" "k8s.io/kubernetes/cmd/$b" "v$ver" "$ldflags"
    done
}

build_etcd() {  # <version>
    local ver="$1" dir="$HERE/go/etcd" out
    if [ "$REGEN" = 1 ] || [ "$(required_version "$dir/go.mod" go.etcd.io/etcd/server/v3)" != "v$ver" ] || [ ! -f "$dir/go.sum" ]; then
        regen_etcd_module "$dir" "$ver"
    fi
    out="$CACHE/bin/etcd-v$ver-$(source_key "$dir")-$GOVERSION"
    if [ -x "$out/etcd" ]; then
        say "etcd v$ver is built ($out/etcd)"
        return
    fi
    download "$dir" go.etcd.io/etcd/server/v3
    write_manifest "$out" "$dir" "-s -w"
    build_binary "$dir" "$out" etcd go.etcd.io/etcd/server/v3 "v$ver" "-s -w"
}

# draxr's own node parts: hand-written, so never regenerated; the key covers their sources.
build_nodes() {
    local dir="$HERE/go/nodes" out t missing=0
    out="$CACHE/bin/nodes-$(source_key "$dir")-$GOVERSION"
    for t in "${NODE_TOOLS[@]}"; do [ -x "$out/$t" ] || missing=1; done
    if [ "$missing" = 0 ]; then
        say "node parts: ${NODE_TOOLS[*]} built ($out)"
        return
    fi
    download "$dir" ./cmd/...
    write_manifest "$out" "$dir" "-s -w"
    for t in "${NODE_TOOLS[@]}"; do
        build_binary "$dir" "$out" "$t" "./cmd/$t" "go-nodes" "-s -w"
    done
}

# The CEL oracle: hand-written like the node parts, so never regenerated; the key covers its sources.
build_celoracle() {
    local dir="$HERE/go/celoracle" out
    out="$CACHE/bin/celoracle-$(source_key "$dir")-$GOVERSION"
    if [ -x "$out/celoracle" ]; then
        say "CEL oracle is built ($out/celoracle)"
        return
    fi
    download "$dir" .
    write_manifest "$out" "$dir" "-s -w"
    build_binary "$dir" "$out" celoracle . "go-celoracle" "-s -w"
}

# The node runtime's part of the build: its functions live beside this script.
# shellcheck source=build-runtime.sh
source "$HERE/build-runtime.sh"

say "Go $GOVERSION, GOPROXY=$(go env GOPROXY), GOMODCACHE=$(go env GOMODCACHE), GOCACHE=$(go env GOCACHE)"
say "binaries: $CACHE/bin; Kubernetes ${RELEASES[*]}"
if [ "$RUNTIME_ONLY" = 0 ]; then
    build_etcd "$ETCD"
    build_nodes
    build_celoracle
    for minor in "${RELEASES[@]}"; do
        var="KUBE_${minor//./_}"
        build_kube "$minor" "${!var}"
    done
fi
build_runtime
say "done in $(elapsed) ($(du -sh "$CACHE/bin" | cut -f1) in $CACHE/bin)"
