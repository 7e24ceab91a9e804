#!/usr/bin/env bash
# The Debian packages a make target needs on the build machine, installed when missing: make runs it
# before building (make demo, make build, make release, make test) and .ci/run through make test.
#
#   release/host-tools.sh build     a bundle for this machine (make build, make demo, make bench)
#   release/host-tools.sh release   + both architectures' bundles and the .deb/.rpm (make release)
#   release/host-tools.sh test      + what the tests run (make test)
#
# It prints nothing when everything is there. Otherwise it says what it installs, or says in one line
# why it cannot (not root, no apt-get) and exits 1.
set -euo pipefail
me=release/host-tools.sh

# build: debootstrap and its keyring (the Debian 11 root filesystems the analysis runs in), cmake
# (expat), binutils (strip, readelf), patch (Debian's source patches), python3-venv (make's .venv).
build=(debootstrap debian-archive-keyring cmake binutils patch python3-venv)
# release: qemu-user-static (the other architecture's bundle), rpm (rpmbuild, rpmsign), gpgv (the signed
# Debian indexes when a lock is refreshed), gnupg (make release SIGNING_KEY=: the signatures, and
# the tests' throwaway key), createrepo-c (the release's RPM repository).
release=(qemu-user-static rpm gpgv gnupg createrepo-c)
# test: iproute2 (the real-kubelet run's node address, in its own network namespace), runc (the
# real-runtime run: containerd's runtime; Kubernetes 1.36 needs containerd 2.x, built from the Go
# module proxy, but Debian's runc serves), strace (the flush test traces every write of a node change),
# dnf (the release's RPM repository installed and upgraded from, as on RHEL and Amazon Linux),
# locales (localedef's sources: the tool run in an operator's 8-bit locale, ISO-8859-1).
test=(iproute2 runc strace dnf locales)

case "${1:-}" in
  build) wanted=("${build[@]}") ;;
  release) wanted=("${build[@]}" "${release[@]}") ;;
  test) wanted=("${build[@]}" "${release[@]}" "${test[@]}") ;;
  *)
    echo "usage: $me build|release|test" >&2
    exit 2
    ;;
esac

missing=()
for package in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$package")
done
((${#missing[@]})) || exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "$me: this machine has no apt-get; install the equivalents of Debian's ${missing[*]} (building needs a Debian or Ubuntu machine: see docs/release.md)" >&2
  exit 1
fi
if [[ $(id -u) != 0 ]]; then
  echo "$me: missing Debian packages ${missing[*]}; run make as root (the build also needs root for its namespaces), or first: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "[host-tools] installing ${missing[*]} (apt-get; once per machine)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
