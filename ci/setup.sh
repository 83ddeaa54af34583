#!/bin/sh
# Installs what gpuwire needs to build and test on Debian 12 / Ubuntu 24.04
# (dpkg-dev and file: cpack -G DEB; debootstrap: the chroot tests; gnuplot-nox:
# ci/report.sh's plots; python3: ci/test_summary.py and the tools tests;
# python3-mpi4py: a real client of the MPI-layer calls; git: the fresh-clone
# test). apt's output goes to a log (SETUP_LOG, default
# /tmp/gpuwire-setup.log); one line says what is being installed. As root, or
# through sudo otherwise; never interactive.
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS="build-essential cmake pkg-config libopenmpi-dev openmpi-bin libucx-dev libibverbs-dev
      librdmacm-dev catch2 iproute2 procps clang libclang-rt-dev
      dpkg-dev file debootstrap debian-archive-keyring gnuplot-nox python3 python3-mpi4py git"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    LOG=${SETUP_LOG:-/tmp/gpuwire-setup.log}
    echo "ci/setup.sh: installing$missing (apt-get, a few minutes; log: $LOG)"
    if ! { $SUDO apt-get update -q &&
           $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
         } >"$LOG" 2>&1; then
        tail -15 "$LOG" >&2
        echo "ci/setup.sh: apt-get failed (the lines above; all of it in $LOG)" >&2
        exit 1
    fi
fi
