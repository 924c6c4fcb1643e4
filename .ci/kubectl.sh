#!/usr/bin/env bash
# Fetch Debian sid's kubectl (1.36, package kubectl from the kubernetes-client source) into .ci/bin
# without installing anything system-wide: `apt-get download` from a private sid source list, then
# `dpkg-deb -x`. The binary only needs libc6 >= 2.34, which Debian 12 has. Without it the kubectl tests
# skip with a clear reason, except under CI=true, where e2e-local needs it and a missing kubectl is a
# failure (exit 1).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
# Says why kubectl is missing; exit 0 (the tests skip), or 1 under CI=true.
unavailable() {
    if [ "${CI:-}" = true ]; then echo "kubectl.sh: error: $*; CI=true makes that a failure" >&2; exit 1; fi
    echo "kubectl.sh: $*; kubectl tests will be skipped"; exit 0
}
if [ -x "$bin/kubectl" ]; then exit 0; fi
command -v apt-get >/dev/null || unavailable "no apt-get"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/sid.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
opts=(-o "Dir::Etc::SourceList=$work/sid.sources" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::status=/dev/null
      -o APT::Sandbox::User=root)
apt-get "${opts[@]}" -qq update || unavailable "apt-get update failed"
version="$(apt-cache "${opts[@]}" show kubectl 2>/dev/null | awk '/^Version:/{print $2; exit}')"
[ -n "$version" ] || unavailable "no kubectl in sid"
(cd "$work" && apt-get "${opts[@]}" -qq download "kubectl=$version") || unavailable "apt-get download kubectl=$version failed"
dpkg-deb -x "$work"/kubectl_*.deb "$work/root" || unavailable "dpkg-deb could not unpack kubectl_$version"
mkdir -p "$bin"
install -m 0755 "$work/root/usr/bin/kubectl" "$bin/kubectl"
"$bin/kubectl" version --client 2>/dev/null | sed -n 1p  # sed reads it all: head could end kubectl with SIGPIPE (141 under pipefail)
