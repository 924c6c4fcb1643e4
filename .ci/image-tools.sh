#!/usr/bin/env bash
# Installs what e2e/images builds the test images with: buildah (the builder; it brings uidmap) and
# mmdebstrap (the Debian root filesystems). busybox-static is not needed on the host: mmdebstrap fetches
# the package the workload image is made of. The image builds run as root (CI does).
# Installs only what is missing, with apt-get (one `apt-get update` first). Under CI=true a tool still
# missing afterwards is a failure (exit 1); otherwise the image tests skip, saying why.
set -uo pipefail
TOOLS=(buildah mmdebstrap)
PACKAGES=(buildah mmdebstrap)

missing() { local t; for t in "${TOOLS[@]}"; do command -v "$t" >/dev/null || echo "$t"; done; }
unavailable() {
    if [ "${CI:-}" = true ]; then echo "image-tools.sh: error: $*; CI=true makes that a failure" >&2; exit 1; fi
    echo "image-tools.sh: $*; the image tests (e2e/images) will be skipped"; exit 0
}

[ -z "$(missing)" ] && exit 0
command -v apt-get >/dev/null || unavailable "no apt-get to install ${PACKAGES[*]}"
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo -n)
echo "image-tools.sh: installing ${PACKAGES[*]} with apt-get"
"${sudo[@]}" apt-get update -qq || unavailable "apt-get update failed"
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${PACKAGES[@]}" \
    || unavailable "apt-get install ${PACKAGES[*]} failed"
still="$(missing | tr '\n' ' ')"
[ -z "$still" ] || unavailable "still not on PATH after apt-get install: $still"
