#!/bin/sh
# gpuwire against Open MPI 5.0, from the same source, on a Debian 12 host:
#   1. a Debian 13 (trixie) chroot with Open MPI 5.0, UCX and Catch2 3, made
#      with debootstrap and reused while its recipe is unchanged;
#   2. a fresh build of this tree inside it, then ctest there (all but the
#      gpu, ompi5 and package labels);
#   3. the host-built (Open MPI 4.1) mca_pml_gpuwire.so loaded by the chroot's
#      Open MPI 5.0 (mpirun and ompi_info): it must refuse, in one line naming
#      both releases, and nothing may crash;
#   4. the other way round: a component compiled against the chroot's 5.0
#      headers with the host's compiler, loaded by the host's Open MPI 4.1;
#      and the component built inside the chroot, which the host cannot even
#      load (it needs the newer glibc): Open MPI must decline it cleanly.
#
# Usage: ci/ompi5_chroot.sh [<host-built mca_pml_gpuwire.so>]
#   (default ${BUILD_DIR:-build}/components/mca_pml_gpuwire.so)
# Environment: GPUWIRE_TRIXIE_DIR  the chroot (default /var/tmp/gpuwire-trixie)
#              GPUWIRE_DEBIAN_MIRROR  (default: the host's Debian mirror)
#              JOBS  build and ctest parallelism (default: nproc)
# Needs root (debootstrap, chroot, mount); exits 77 (skipped) without it,
# 1 on any failure, 0 when everything passed.
set -eu
HOST_SO=${1:-}
[ -z "$HOST_SO" ] || HOST_SO=$(readlink -f "$HOST_SO")
cd "$(dirname "$0")/.."
SRC=$PWD
CHROOT_NAME=ompi5_chroot
. "$SRC/ci/chroot_common.sh"
[ -n "$HOST_SO" ] || HOST_SO=$SRC/${BUILD_DIR:-build}/components/mca_pml_gpuwire.so
ROOT=${GPUWIRE_TRIXIE_DIR:-/var/tmp/gpuwire-trixie}
JOBS=${JOBS:-$(nproc)}
SUITE=trixie
PKGS="build-essential cmake pkg-config libopenmpi-dev openmpi-bin libucx-dev catch2 python3 ccache"
# Inside the chroot: Open MPI headers its devel package lacks, from its source.
HDRS=/opt/gpuwire-ompi-headers
# Written into the chroot once provisioned; any change here provisions again.
RECIPE="gpuwire chroot 1: $SUITE: $PKGS: $HDRS"

T0=$(now)

if [ "$(id -u)" -ne 0 ]; then
    say "SKIP: needs root (debootstrap, chroot, mount)"
    exit 77
fi
[ -f "$HOST_SO" ] || die "no host-built component at $HOST_SO (run ci/build.sh first, or pass its path)"

MULTIARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
TMP=$(mktemp -d /tmp/gpuwire-ompi5.XXXXXX)

LOCKED=0
cleanup() {
    if [ "$LOCKED" -eq 1 ]; then
        unmount_below "$ROOT"
        unmount_below "$ROOT.partial"
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# One run at a time per chroot.
chroot_lock "$ROOT"
LOCKED=1
# A run killed before its trap left mounts behind.
unmount_below "$ROOT"
unmount_below "$ROOT.partial"

MIRROR=$(debian_mirror)

# ---------------------------------------------------------------------------
# 1. The chroot
# ---------------------------------------------------------------------------
if ! chroot_is_current "$ROOT" "$SUITE" "$MIRROR"; then
    if ! have_debootstrap; then
        # CI installs it (ci/setup.sh); elsewhere (the GPU machine) this is a skip.
        say "SKIP: debootstrap is not available (apt-get install debootstrap): cannot make the Debian 13 chroot"
        exit 77
    fi
    chroot_debootstrap "$ROOT" "$SUITE" "$MIRROR" "$TMP/debootstrap.log"
fi

mount_system "$ROOT"

if [ "$(cat "$ROOT/etc/gpuwire-chroot" 2>/dev/null || true)" != "$RECIPE" ]; then
    t=$(now)
    in_chroot "$ROOT" "apt-get update -qq && apt-get install -y -qq --no-install-recommends $PKGS" \
        >"$TMP/apt.log" 2>&1 || {
        tail -10 "$TMP/apt.log" >&2
        die "installing $PKGS in the chroot failed"
    }
    # Headers named by opal_config.h but not installed (Debian 13's 5.0.7 lacks
    # opal/mca/threads/pthreads/ and opal/mca/timer/linux/): taken from the
    # source package of exactly the installed version, Debian's patches applied.
    in_chroot "$ROOT" "
        set -eu
        inc=
        for d in \$(mpicc --showme:incdirs); do [ -f \$d/opal_config.h ] && inc=\$d; done
        [ -n \"\$inc\" ] || { echo 'no opal_config.h among mpicc --showme:incdirs'; exit 1; }
        missing=\$(sed -n 's/^#define MCA_[A-Za-z0-9_]*_HEADER \"\\(.*\\)\"\$/\\1/p' \$inc/opal_config.h |
                   while read -r h; do [ -e \$inc/\$h ] || echo \$h; done)
        rm -rf $HDRS
        mkdir -p $HDRS
        [ -n \"\$missing\" ] || exit 0
        src=\$(dpkg-query -W -f='\${source:Package}' libopenmpi-dev)
        ver=\$(dpkg-query -W -f='\${Version}' libopenmpi-dev)
        echo 'deb-src $MIRROR $SUITE main' >/etc/apt/sources.list.d/gpuwire-src.list
        apt-get update -qq
        rm -rf /var/tmp/gpuwire-src && mkdir -p /var/tmp/gpuwire-src && cd /var/tmp/gpuwire-src
        apt-get -o APT::Sandbox::User=root source -qq \"\$src=\$ver\" >/dev/null
        tree=\$(find . -mindepth 1 -maxdepth 1 -type d | head -1)
        for h in \$missing; do
            d=\$(dirname \$h)
            mkdir -p $HDRS/\$d
            cp \$tree/\$d/*.h $HDRS/\$d/
            [ -e $HDRS/\$h ] || { echo \"\$h is not in \$src \$ver either\"; exit 1; }
            echo \"header from \$src \$ver: \$h\"
        done
        cd / && rm -rf /var/tmp/gpuwire-src
    " >"$TMP/headers.log" 2>&1 || {
        tail -10 "$TMP/headers.log" >&2
        die "could not supply the Open MPI headers that libopenmpi-dev lacks"
    }
    sed 's/^/ompi5_chroot: /' "$TMP/headers.log" | grep 'header from' || true
    echo "$RECIPE" >"$ROOT/etc/gpuwire-chroot"
    say "packages and headers: $(( $(now) - t )) s"
fi

V4=$(ompi_info | sed -n 's/^ *Open MPI: *//p' | head -1)
V5=$(in_chroot "$ROOT" "ompi_info" | sed -n 's/^ *Open MPI: *//p' | head -1)
PKGLIB4=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
PKGLIB5=$(in_chroot "$ROOT" "ompi_info --path pkglibdir --parsable" | sed 's/.*pkglibdir://')
say "host: Open MPI $V4; chroot: Open MPI $V5, $(in_chroot "$ROOT" \
    "dpkg-query -W -f='UCX \${Version}, ' libucx-dev; dpkg-query -W -f='Catch2 \${Version}' catch2")"

# ---------------------------------------------------------------------------
# 2. Build and test inside the chroot
# ---------------------------------------------------------------------------
mkdir -p "$ROOT/src"
mount --bind "$SRC" "$ROOT/src"
mount -o remount,bind,ro "$ROOT/src"

t=$(now)
# A fresh build folder every run; ccache (kept in the chroot) makes a rerun
# over unchanged sources cheap.
in_chroot "$ROOT" "rm -rf /build && export CCACHE_DIR=/var/cache/gpuwire-ccache CCACHE_MAXSIZE=1G &&
    cmake -S /src -B /build -DGPUWIRE_OMPI_EXTRA_INCLUDE_DIRS=$HDRS \
        -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache &&
    cmake --build /build -j $JOBS" >"$TMP/build.log" 2>&1 || {
    grep -E 'error|Error' "$TMP/build.log" | head -20 >&2
    tail -5 "$TMP/build.log" >&2
    die "the build against Open MPI $V5 failed"
}
say "build against Open MPI $V5: $(( $(now) - t )) s"

t=$(now)
ctest_rc=0
in_chroot "$ROOT" "cd /build && ctest -LE 'gpu|ompi5|package' --output-on-failure -j $JOBS --timeout 300" \
    >"$TMP/ctest.log" 2>&1 || ctest_rc=$?
cat "$TMP/ctest.log"
say "ctest under Open MPI $V5: rc=$ctest_rc in $(( $(now) - t )) s"

# ---------------------------------------------------------------------------
# 3./4. Each release's component in the other release's Open MPI
# ---------------------------------------------------------------------------
failures=0
[ "$ctest_rc" -eq 0 ] || failures=$((failures + 1))
pass() { say "PASS: $*"; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }
crashed() { grep -aqE 'exited on signal|Segmentation fault|core dumped|Bus error|Signal: ' "$1"; }
refusal() { grep -aF "gpuwire pml was built for Open MPI $1 but Open MPI $2 is running" "$3" | head -1; }

# check_refusal <what> <built> <running> <output file> <exit status> <ompi_info?>
check_refusal() {
    line=$(refusal "$2" "$3" "$4")
    if crashed "$4"; then
        fail "$1: crashed: $(grep -aE 'signal|Segmentation|core dumped|Bus error|Signal' "$4" | head -1)"
    elif [ "$6" = mpirun ] && [ "$5" -eq 0 ]; then
        fail "$1: the job ran although the component was built for Open MPI $2"
    elif [ "$6" = ompi_info ] && [ "$5" -ne 0 ]; then
        fail "$1: ompi_info exited with $5"
    elif [ -z "$line" ]; then
        fail "$1: no line naming Open MPI $2 and $3; the output began:"
        head -8 "$4"
    else
        pass "$1: $(echo "$line" | sed 's/^\[[^]]*\] //')"
    fi
}

HELLO=/build/tests/integration/gpuwire_hello
mkdir -p "$ROOT/opt/gpuwire-cross"
rm -f "$ROOT/opt/gpuwire-cross/"*
cp "$HOST_SO" "$ROOT/opt/gpuwire-cross/mca_pml_gpuwire.so"
# The core it needs, from beside it (RUNPATH $ORIGIN).
cp "$(dirname "$HOST_SO")/libgpuwire_core.so" "$ROOT/opt/gpuwire-cross/"
rc=0
in_chroot "$ROOT" "mpirun --allow-run-as-root --oversubscribe -np 2 \
    --mca mca_base_component_path $PKGLIB5:/opt/gpuwire-cross --mca pml gpuwire $HELLO" \
    >"$TMP/fwd.txt" 2>&1 || rc=$?
check_refusal "$V4 component, mpirun of $V5" "$V4" "$V5" "$TMP/fwd.txt" $rc mpirun
rc=0
in_chroot "$ROOT" "OMPI_MCA_mca_base_component_path=$PKGLIB5:/opt/gpuwire-cross ompi_info" \
    >"$TMP/fwd_info.txt" 2>&1 || rc=$?
check_refusal "$V4 component, ompi_info of $V5" "$V4" "$V5" "$TMP/fwd_info.txt" $rc ompi_info

# The host's compiler and glibc, the chroot's Open MPI 5.0 (and PMIx) headers;
# UCX from the host.
t=$(now)
mkdir -p "$TMP/bin"
cat >"$TMP/bin/mpicc" <<EOF
#!/bin/sh
case "\$1" in
  --showme:incdirs) echo "$(in_chroot "$ROOT" "mpicc --showme:incdirs" | sed "s|^/|$ROOT/|; s| /| $ROOT/|g")" ;;
  --showme:libdirs) echo "$(in_chroot "$ROOT" "mpicc --showme:libdirs" | sed "s|^/|$ROOT/|; s| /| $ROOT/|g")" ;;
  *) exit 1 ;;
esac
EOF
chmod +x "$TMP/bin/mpicc"
PKG_CONFIG_LIBDIR=$ROOT/usr/lib/$MULTIARCH/pkgconfig:$ROOT/usr/share/pkgconfig \
PKG_CONFIG_SYSROOT_DIR=$ROOT \
cmake -S "$SRC" -B "$TMP/h5" -DGPUWIRE_MPICC="$TMP/bin/mpicc" -DGPUWIRE_WITH_CUDA=OFF \
    -DGPUWIRE_BUILD_TESTS=OFF -DGPUWIRE_UCX_ROOT=/ \
    -DGPUWIRE_OMPI_EXTRA_INCLUDE_DIRS="$ROOT$HDRS" >"$TMP/h5.log" 2>&1 &&
    cmake --build "$TMP/h5" -j "$JOBS" --target mca_pml_gpuwire >>"$TMP/h5.log" 2>&1 || {
    grep -E 'error|Error' "$TMP/h5.log" | head -20 >&2
    die "building the component against Open MPI $V5's headers with the host's compiler failed"
}
grep -q "Open MPI $V5: headers $ROOT/" "$TMP/h5.log" ||
    die "the host's cmake did not take Open MPI $V5's headers from the chroot: $(grep 'Open MPI' "$TMP/h5.log" | head -1)"
say "component against $V5 headers with the host's compiler: $(( $(now) - t )) s"
mpicc -o "$TMP/hello" "$SRC/tests/integration/hello.c"
rc=0
mpirun --allow-run-as-root --oversubscribe -np 2 \
    --mca mca_base_component_path "$PKGLIB4:$TMP/h5/components" --mca pml gpuwire "$TMP/hello" \
    >"$TMP/rev.txt" 2>&1 || rc=$?
check_refusal "$V5 component, mpirun of $V4" "$V5" "$V4" "$TMP/rev.txt" $rc mpirun
rc=0
OMPI_MCA_mca_base_component_path="$PKGLIB4:$TMP/h5/components" ompi_info \
    >"$TMP/rev_info.txt" 2>&1 || rc=$?
check_refusal "$V5 component, ompi_info of $V4" "$V5" "$V4" "$TMP/rev_info.txt" $rc ompi_info

# The chroot's own build: the host's glibc may be too old to load it at all;
# then Open MPI's loader must decline it, and still nothing may crash.
mkdir -p "$TMP/c5"
cp "$ROOT/build/components/mca_pml_gpuwire.so" "$ROOT/build/components/libgpuwire_core.so" "$TMP/c5/"
rc=0
mpirun --allow-run-as-root --oversubscribe -np 2 \
    --mca mca_base_component_path "$PKGLIB4:$TMP/c5" --mca pml gpuwire "$TMP/hello" \
    >"$TMP/rev_c5.txt" 2>&1 || rc=$?
line=$(refusal "$V5" "$V4" "$TMP/rev_c5.txt")
loader=$(grep -a 'unable to open mca_pml_gpuwire' "$TMP/rev_c5.txt" | head -1 | sed 's/^\[[^]]*\] //')
if crashed "$TMP/rev_c5.txt" || [ "$rc" -eq 0 ] || { [ -z "$line" ] && [ -z "$loader" ]; }; then
    fail "chroot-built component, mpirun of $V4: rc=$rc; the output began:"
    head -8 "$TMP/rev_c5.txt"
else
    pass "chroot-built component, mpirun of $V4: ${line:-$loader}"
fi

say "total: $(( $(now) - T0 )) s, $failures failure(s)"
[ "$failures" -eq 0 ]
