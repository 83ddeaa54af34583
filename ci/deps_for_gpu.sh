#!/bin/sh
# Prepares .deps/ (git-ignored) with the headers the GPU machine lacks: UCX's
# (libucx-dev; the 1.13 headers work with its 1.16 runtime) and Catch2's.
# Send it along with the run (carry .deps).
set -eu
cd "$(dirname "$0")/.."
[ -d .deps/ucx/usr/include/ucp ] && [ -d .deps/catch2/usr/include/catch2 ] && exit 0
mkdir -p .deps/debs
(cd .deps/debs && apt-get download libucx-dev catch2)
dpkg -x .deps/debs/libucx-dev_*.deb .deps/ucx
dpkg -x .deps/debs/catch2_*.deb .deps/catch2
rm -rf .deps/debs .deps/ucx/usr/lib .deps/ucx/usr/share
