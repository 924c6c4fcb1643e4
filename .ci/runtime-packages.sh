#!/usr/bin/env bash
# Installs the Debian packages the real node runtime needs beside what build.sh builds: runc (building it
# needs cgo and libseccomp), the firewall and network tools the CNI plugins and kube-proxy exec
# (iptables, nft, conntrack, ip), and gcc with a static libc for the pause binary. Only what is missing
# is installed (a no-op on a machine that has them). When it cannot install them it says why and exits
# 0 (the runtime tests then skip), or 1 under CI=true.
set -uo pipefail
# command -> the Debian package that provides it
declare -A NEEDED=(
    [runc]=runc
    [iptables]=iptables
    [nft]=nftables
    [conntrack]=conntrack
    [ip]=iproute2
    [gcc]=gcc
    [busybox]=busybox-static
)
missing=()
for cmd in "${!NEEDED[@]}"; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEEDED[$cmd]}")
done
# gcc -static needs libc.a, which libc6-dev ships.
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] ||
    missing+=(libc6-dev)
[ "${#missing[@]}" = 0 ] && exit 0

unavailable() {
    if [ "${CI:-}" = true ]; then
        echo "runtime-packages.sh: error: $*; the node runtime needs ${missing[*]}; CI=true makes that a failure" >&2
        exit 1
    fi
    echo "runtime-packages.sh: $*; the node runtime's tests will be skipped (they need ${missing[*]})" >&2
    exit 0
}
command -v apt-get >/dev/null 2>&1 || unavailable "no apt-get to install ${missing[*]}"
[ "$(id -u)" = 0 ] || unavailable "not root: cannot apt-get install ${missing[*]}"
echo "runtime-packages.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -qq update || unavailable "apt-get update failed"
apt-get -qq install -y --no-install-recommends "${missing[@]}" >/dev/null || unavailable "apt-get install ${missing[*]} failed"
runc --version | sed -n 1p
