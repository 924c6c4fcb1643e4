#!/usr/bin/env bash
# Builds helm (the chart tests' `helm lint` and `helm template`) from its Go module at the version pinned
# below into .ci/bin/helm, with `go install`: no release download, only the Go module proxy.
#
#   .ci/helm.sh          build it when missing or at another version (a no-op once built)
#
# Without Go this prints why and exits 0 (the chart tests then skip with that reason), except under
# CI=true, where a missing helm is a failure (exit 1).
set -euo pipefail

HELM_VERSION=v3.21.4
# The Kubernetes minor of the k8s.io/client-go that helm v3.21.4 requires (v0.36.x): helm's own release
# build stamps it as the default `.Capabilities.KubeVersion` of `helm template` and `helm lint`.
HELM_KUBE_MINOR=36
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${DRAXR_HELM_BIN:-$HERE/bin}"
START=$SECONDS

say() { printf '[helm] %s\n' "$*"; }
unavailable() {
    if [ "${CI:-}" = true ]; then
        printf '[helm] error: %s; CI=true makes that a failure\n' "$*" >&2
        exit 1
    fi
    say "SKIPPED: $* (the chart tests will skip)"
    exit 0
}

if [ -x "$BIN/helm" ] && [ "$("$BIN/helm" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
    say "helm $HELM_VERSION is built ($BIN/helm)"
    exit 0
fi
command -v go >/dev/null 2>&1 || unavailable "go is not on PATH: install Go >= 1.24 (https://go.dev/dl) to build helm $HELM_VERSION"

mkdir -p "$BIN"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
say "building helm $HELM_VERSION with $(go env GOVERSION) (GOPROXY=$(go env GOPROXY)) ..."
# Stamped as helm's own Makefile does: its version (else `helm version` says v3.21) and the default
# Kubernetes version of its capabilities (else v1.20).
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
done
if ! CGO_ENABLED=0 GOWORK=off GOBIN="$BIN" \
        go install -trimpath -ldflags "$LDFLAGS" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$LOG" 2>&1; then
    if grep -qiE 'dial tcp|no such host|i/o timeout|connection refused|TLS handshake|proxy.golang.org|: 403 Forbidden|: 404 Not Found|module lookup disabled' "$LOG"; then
        unavailable "the Go module proxy is unreachable: $(grep -m1 -iE 'dial tcp|no such host|timeout|refused|TLS|403|404|lookup disabled' "$LOG")"
    fi
    printf '[helm] error: go install helm.sh/helm/v3/cmd/helm@%s failed; its last lines:\n' "$HELM_VERSION" >&2
    tail -n 25 "$LOG" >&2
    exit 1
fi
say "built helm $("$BIN/helm" version --template '{{.Version}}') in $((SECONDS - START))s ($BIN/helm)"
