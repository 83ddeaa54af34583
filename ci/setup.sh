#!/bin/sh
# Installs what gpuwire needs to build and test on Debian 12 / Ubuntu 24.04
# (dpkg-dev and file: cpack -G DEB; debootstrap: the chroot tests; gnuplot-nox:
# ci/report.sh's plots).
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libopenmpi-dev openmpi-bin libucx-dev libibverbs-dev
      librdmacm-dev catch2 iproute2 procps clang libclang-rt-dev
      dpkg-dev file debootstrap debian-archive-keyring gnuplot-nox"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "ci/setup.sh: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
