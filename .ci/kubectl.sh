#!/usr/bin/env bash
# Fetch Debian sid's kubectl (1.36, package kubectl from the kubernetes-client source) into .ci/bin
# without installing anything system-wide: `apt-get download` from a private sid source list, then
# `dpkg-deb -x`. The binary only needs libc6 >= 2.34, which Debian 12 has. Best effort: without it,
# the kubectl tests skip with a clear reason.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
if [ -x "$bin/kubectl" ]; then exit 0; fi
command -v apt-get >/dev/null || { echo "kubectl.sh: no apt-get; kubectl tests will be skipped"; exit 0; }
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
if ! apt-get "${opts[@]}" -qq update; then echo "kubectl.sh: apt-get update failed; kubectl tests will be skipped"; exit 0; fi
version="$(apt-cache "${opts[@]}" show kubectl 2>/dev/null | awk '/^Version:/{print $2; exit}')"
[ -n "$version" ] || { echo "kubectl.sh: no kubectl in sid; kubectl tests will be skipped"; exit 0; }
(cd "$work" && apt-get "${opts[@]}" -qq download "kubectl=$version") || { echo "kubectl.sh: download failed"; exit 0; }
dpkg-deb -x "$work"/kubectl_*.deb "$work/root"
mkdir -p "$bin"
install -m 0755 "$work/root/usr/bin/kubectl" "$bin/kubectl"
"$bin/kubectl" version --client 2>/dev/null | head -1
