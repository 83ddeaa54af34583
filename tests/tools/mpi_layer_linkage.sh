#!/bin/sh
# libgpuwire_mpi.so is a thin layer over the one libgpuwire_core.so: it needs
# the core, finds it where the core is installed, and holds no GPU code of its
# own (no CUDA runtime, no memory classifier, no C++ at all), so a process that
# preloads it still has one classifier and one GPU context; and it is never
# unloaded (NODELETE), so its reference on that context cannot outlive the core.
#
# Usage: mpi_layer_linkage.sh <readelf> <nm> <cmake> <build dir> <layer> <layer of the package>
#                             <core dir of a plain install> <RUNPATH of the package's layer>
# Installs the build tree twice into a scratch DESTDIR (cmake --install, and
# its component "deb" under /usr as cpack does) and checks that each installed
# layer's RUNPATH leads to the libgpuwire_core.so installed beside the
# components, and that a plain install leaves a link to the layer there.
set -u
READELF=$1 NM=$2 CMAKE=$3 BUILD=$4 LAYER=$5 DEB_LAYER=$6 CORE_DIR=$7 DEB_RUNPATH=$8
fails=0
fail() { echo "mpi_layer_linkage: FAIL: $*"; fails=$((fails + 1)); }
runpath() { "$READELF" -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }

for so in "$LAYER" "$DEB_LAYER"; do
    dyn=$("$READELF" -d "$so") || { fail "readelf -d $so failed"; continue; }
    echo "$dyn" | grep -E '\((NEEDED|RUNPATH|RPATH)\)' | sed "s|^|$so: |"
    echo "$dyn" | grep -q '(NEEDED).*\[libgpuwire_core\.so\]' || fail "$so: no NEEDED libgpuwire_core.so"
    echo "$dyn" | grep -q '(RPATH)' && fail "$so: RPATH instead of RUNPATH (LD_LIBRARY_PATH would lose)"
    echo "$dyn" | grep -q '(FLAGS_1).*NODELETE' ||
        fail "$so: not NODELETE (a dlclose could unload the core under a live GPU context)"
    echo "$dyn" | grep -E '(NEEDED).*\[lib(stdc\+\+|cudart|cuda)\.' &&
        fail "$so: needs a C++ or CUDA library of its own"
    # The whole symbol table, local symbols included: a static CUDA runtime
    # or a copy of the cuda module would show here.
    own=$("$NM" "$so" | awk '{ print $NF }' |
          grep -E '^(cuda[A-Z]|cu[A-Z][a-z]|_ZN7gpuwire|__cudart)' | head -5)
    [ -z "$own" ] || fail "$so: holds GPU code of its own: $own"
    # And the entry pml gpuwire calls to put the layer in without a preload.
    exported=$("$NM" -D --defined-only "$so" | awk '{ print $NF }' |
               grep -Ev '^(MPI_|MPIX_|gw_mpi_layer_install$)' | head -5)
    [ -z "$exported" ] || fail "$so: exports more than MPI_ and MPIX_ functions: $exported"
done
runpath "$DEB_LAYER" | grep -qxF "$DEB_RUNPATH" ||
    fail "$DEB_LAYER: RUNPATH $(runpath "$DEB_LAYER"), not $DEB_RUNPATH"

DEST=$(mktemp -d "${TMPDIR:-/tmp}/gw_layer_install.XXXXXX")
trap 'rm -rf "$DEST"' EXIT
# A plain install: the layer under the prefix, the core beside the components.
if DESTDIR=$DEST/plain "$CMAKE" --install "$BUILD" --prefix /opt/gw >"$DEST/plain.log" 2>&1; then
    so=$DEST/plain/opt/gw/$(cd "$DEST/plain/opt/gw" && find . -name libgpuwire_mpi.so | head -1)
    rp=$(runpath "$so")
    echo "cmake --install: $so: RUNPATH $rp"
    [ "$rp" = "$CORE_DIR" ] || fail "installed layer: RUNPATH $rp, not the components' folder $CORE_DIR"
    [ -f "$DEST/plain$rp/libgpuwire_core.so" ] ||
        fail "installed layer: no libgpuwire_core.so in its RUNPATH $rp"
    # pml gpuwire finds the layer beside itself (its RUNPATH is $ORIGIN).
    link=$(readlink "$DEST/plain$CORE_DIR/libgpuwire_mpi.so")
    [ "$DEST/plain$link" -ef "$so" ] ||
        fail "no link to the installed layer beside the components ($link)"
else
    tail -5 "$DEST/plain.log"
    fail "cmake --install $BUILD failed"
fi
# The package's files, as cpack installs them (component deb, prefix /usr).
if DESTDIR=$DEST/deb "$CMAKE" --install "$BUILD" --component deb --prefix /usr >"$DEST/deb.log" 2>&1; then
    so=$(find "$DEST/deb" -name libgpuwire_mpi.so | head -1)
    rp=$(runpath "$so")
    dir=$(dirname "$so")/${rp#\$ORIGIN/}
    echo "package: $so: RUNPATH $rp"
    case "$rp" in
        '$ORIGIN/'*) [ -f "$dir/libgpuwire_core.so" ] ||
                         fail "package's layer: no libgpuwire_core.so in its RUNPATH $rp" ;;
        *) fail "package's layer: RUNPATH $rp does not start with \$ORIGIN/" ;;
    esac
else
    tail -5 "$DEST/deb.log"
    fail "cmake --install $BUILD --component deb failed"
fi
[ "$fails" -eq 0 ] && echo "mpi_layer_linkage: ok"
[ "$fails" -eq 0 ]
