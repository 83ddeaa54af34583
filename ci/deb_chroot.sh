#!/bin/sh
# The Debian package of gpuwire, installed into a clean Debian of the host's
# release (Debian 12, bookworm, in CI):
#   1. cpack -G DEB from a build folder; the package must hold both components
#      in Open MPI's component folder and depend on exactly the Open MPI
#      package it was built against, and on UCX's runtime package;
#   2. an overlay (or copy) of a cached minimal Debian (debootstrap, with the
#      packages the .deb needs downloaded, not installed) per run, so every
#      run installs into a clean tree;
#   3. apt-get install of the .deb there (apt resolves its dependencies), then
#      ompi_info must list pml and coll gpuwire, and a 2-rank ping-pong under
#      plain "mpirun --mca pml gpuwire" (no component path) must run through
#      pml gpuwire; the same with the coll list and the preload library;
#   4. apt-get remove: the components must be gone.
#
# Usage: ci/deb_chroot.sh <build folder> <deb_pingpong program built there>
# Environment: GPUWIRE_DEB_CHROOT_DIR  the cached base
#                (default /var/tmp/gpuwire-deb-<release codename>)
#              GPUWIRE_DEBIAN_MIRROR  (default: the host's Debian mirror)
# Needs a Debian host (the package depends on the host's own Open MPI
# package), root (debootstrap, chroot, mount) and debootstrap: exits 77
# (skipped) without them, 1 on any failure, 0 when everything passed.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 <build folder> <deb_pingpong>" >&2; exit 2; }
BUILD=$(readlink -f "$1")
PROG=$(readlink -f "$2")
cd "$(dirname "$0")/.."
CHROOT_NAME=deb_chroot
. ci/chroot_common.sh
# Installed next to the .deb: mpirun and ompi_info (the .deb only recommends them).
EXTRA=openmpi-bin
T0=$(now)

if [ "$(id -u)" -ne 0 ]; then
    say "SKIP: needs root (debootstrap, chroot, mount)"
    exit 77
fi
# The chroot runs the host's release: the package depends on exactly the
# host's Open MPI package, which only that release carries.
SUITE=$(. /etc/os-release && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}") || SUITE=""
if [ -z "$SUITE" ]; then
    say "SKIP: needs a Debian host (this is $(. /etc/os-release && echo "${PRETTY_NAME:-unknown}"))"
    exit 77
fi
BASE=${GPUWIRE_DEB_CHROOT_DIR:-/var/tmp/gpuwire-deb-$SUITE}
[ -f "$BUILD/CPackConfig.cmake" ] || die "no CPackConfig.cmake in $BUILD (configure it with cmake first)"
[ -x "$PROG" ] || die "no test program at $PROG (build the deb_pingpong target)"

TMP=$(mktemp -d /tmp/gpuwire-deb.XXXXXX)
RUN=""
LOCKED=0
# Removes a run's tree, never through a mount.
remove_run() {
    unmount_below "$1"
    if [ -n "$(awk -v r="$1" 'index($2, r "/") == 1' /proc/mounts)" ]; then
        say "something is still mounted below $1; left in place"
    else
        rm -rf "$1"
    fi
}
cleanup() {
    if [ "$LOCKED" -eq 1 ]; then
        unmount_below "$BASE"
        [ -z "$RUN" ] || remove_run "$RUN"
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir "$TMP/probe"
if ! mount -t tmpfs tmpfs "$TMP/probe" 2>/dev/null; then
    say "SKIP: cannot mount (a container without CAP_SYS_ADMIN?); chroot needs /proc and /dev/shm"
    exit 77
fi
umount "$TMP/probe"

# ---------------------------------------------------------------------------
# 1. The package
# ---------------------------------------------------------------------------
t=$(now)
# As a user runs it (it builds the "preinstall" target first, a no-op on an
# up-to-date build); the output goes to a scratch folder.
cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$TMP/pkg" >"$TMP/cpack.log" 2>&1 || {
    tail -15 "$TMP/cpack.log" >&2
    die "cpack -G DEB failed in $BUILD"
}
DEB=$(ls "$TMP"/pkg/gpuwire_*.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || die "cpack made no gpuwire_*.deb: $(tail -1 "$TMP/cpack.log")"
say "cpack: $(basename "$DEB"), $(( $(stat -c %s "$DEB") / 1024 )) KiB, $(( $(now) - t )) s"

DEPENDS=$(dpkg-deb -f "$DEB" Depends)
say "Depends: $DEPENDS"
failures=0
pass() { say "PASS: $*"; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }

# The Debian packages of the host's libmpi and libucp, with their versions.
owner() { dpkg-query -S "$(readlink -f "$1")" 2>/dev/null | sed -n '1s/:.*//p'; }
LIBDIR=$(mpicc --showme:libdirs | awk '{ print $1 }')
OMPI_PKG=$(owner "$LIBDIR/libmpi.so")
OMPI_VER=$(dpkg-query -W -f='${Version}' "$OMPI_PKG")
UCX_LIB=$(ldd "$BUILD/components/mca_pml_gpuwire.so" | awk '/libucp\.so/ { print $3 }')
UCX_PKG=$(owner "$UCX_LIB")
if [ -z "$OMPI_PKG" ] || [ -z "$UCX_PKG" ]; then
    die "the host's libmpi ($LIBDIR) or libucp ($UCX_LIB) is not from a Debian package"
fi
case ", $DEPENDS," in
    *", $OMPI_PKG (= $OMPI_VER),"*) pass "depends on $OMPI_PKG (= $OMPI_VER)" ;;
    *) fail "Depends lacks $OMPI_PKG (= $OMPI_VER), the Open MPI it was built against" ;;
esac
case ", $DEPENDS," in
    *", $UCX_PKG,"* | *", $UCX_PKG ("*) pass "depends on $UCX_PKG" ;;
    *) fail "Depends lacks $UCX_PKG, UCX's runtime package" ;;
esac
PKGLIB=$(ompi_info --path pkglibdir --parsable | sed 's/.*pkglibdir://')
# A link is listed as "path -> target": the path is kept.
dpkg-deb -c "$DEB" | sed 's/ -> .*//' | awk '{ print $NF }' | sed 's|^\./|/|' >"$TMP/contents"
for f in "$PKGLIB/mca_pml_gpuwire.so" "$PKGLIB/mca_coll_gpuwire.so" "$PKGLIB/mca_osc_gpuwire.so" \
         "$PKGLIB/libgpuwire_core.so" /usr/bin/gpuwire-info; do
    grep -qx "$f" "$TMP/contents" || fail "the package lacks $f"
done
PRELOAD=$(grep '/libgpuwire_mpi\.so$' "$TMP/contents" | head -1)
[ -n "$PRELOAD" ] || fail "the package lacks libgpuwire_mpi.so"
# The former name of the preload library, a link to it.
grep -q '/libgpuwire_cuda_aware\.so$' "$TMP/contents" ||
    fail "the package lacks libgpuwire_cuda_aware.so (the link to libgpuwire_mpi.so)"
# The package has install rules of its own: it must hold every file a plain
# cmake --install puts in place (a new rule there needs its twin in the
# top-level CMakeLists.txt's package section).
DESTDIR="$TMP/plain" cmake --install "$BUILD" >"$TMP/plain.log" 2>&1 || {
    tail -5 "$TMP/plain.log" >&2
    die "cmake --install $BUILD failed"
}
for f in $(find "$TMP/plain" ! -type d -printf '%f\n' | sort -u); do
    grep -q "/$f\$" "$TMP/contents" || fail "the package lacks $f, which cmake --install installs"
done

# ---------------------------------------------------------------------------
# 2. A clean Debian with the packages the .deb needs downloaded
# ---------------------------------------------------------------------------
chroot_lock "$BASE"
LOCKED=1
# What earlier runs killed before their trap left behind.
unmount_below "$BASE"
for old in "$BASE".run.*; do
    [ -d "$old" ] || continue
    remove_run "$old"
done

MIRROR=$(debian_mirror)
if ! chroot_is_current "$BASE" "$SUITE" "$MIRROR"; then
    if ! have_debootstrap; then
        say "SKIP: debootstrap is not available (apt-get install debootstrap)"
        exit 77
    fi
    chroot_debootstrap "$BASE" "$SUITE" "$MIRROR" "$TMP/debootstrap.log"
fi
# The downloads depend on what the .deb asks for: a new Depends line (a new
# Open MPI on the host, a new library) downloads again, with fresh lists.
RECIPE="gpuwire deb base 1: $SUITE: $MIRROR: $DEPENDS: $EXTRA"
if [ "$(cat "$BASE/etc/gpuwire-base" 2>/dev/null || true)" != "$RECIPE" ]; then
    t=$(now)
    rm -f "$BASE/etc/gpuwire-base"
    cp "$DEB" "$BASE/tmp/gpuwire.deb"
    in_chroot "$BASE" "apt-get clean && apt-get update -qq &&
        apt-get install -y -qq --download-only --no-install-recommends /tmp/gpuwire.deb $EXTRA" \
        >"$TMP/download.log" 2>&1 || {
        rm -f "$BASE/tmp/gpuwire.deb"
        tail -10 "$TMP/download.log" >&2
        die "downloading what the package needs from $MIRROR failed (is $OMPI_PKG $OMPI_VER on the mirror?)"
    }
    rm -f "$BASE/tmp/gpuwire.deb"
    echo "$RECIPE" >"$BASE/etc/gpuwire-base"
    say "base: apt lists and $(ls "$BASE"/var/cache/apt/archives/*.deb | wc -l) packages downloaded in $(( $(now) - t )) s"
fi

# The run's own tree: an overlay over the base, a copy where overlays fail.
t=$(now)
RUN=$(mktemp -d "$BASE.run.XXXXXX")
mkdir -p "$RUN/upper" "$RUN/work" "$RUN/root"
if mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$RUN/upper,workdir=$RUN/work" \
        "$RUN/root" 2>/dev/null; then
    how=overlay
else
    cp -a "$BASE/." "$RUN/root/"
    how=copy
fi
R=$RUN/root
mount_system "$R"
say "clean tree ($how of $BASE): $(( $(now) - t )) s"

# ---------------------------------------------------------------------------
# 3. Install and run
# ---------------------------------------------------------------------------
t=$(now)
cp "$DEB" "$R/tmp/"
mkdir -p "$R/opt/gpuwire-test"
cp "$PROG" "$R/opt/gpuwire-test/deb_pingpong"
in_chroot "$R" "apt-get install -y -q --no-install-recommends /tmp/$(basename "$DEB") $EXTRA" \
    >"$TMP/install.log" 2>&1 || {
    tail -15 "$TMP/install.log" >&2
    die "apt-get install of $(basename "$DEB") into a clean $SUITE failed"
}
say "apt-get install: $(( $(now) - t )) s, $(grep -c '^Setting up' "$TMP/install.log") packages set up"
grep -E '^(Get|Err):' "$TMP/install.log" | grep -v ' /tmp/' | head -3 | sed "s/^/$CHROOT_NAME: downloaded: /" || true

CPKGLIB=$(in_chroot "$R" "ompi_info --path pkglibdir --parsable" | sed 's/.*pkglibdir://')
for c in pml coll; do
    if [ -f "$R$CPKGLIB/mca_${c}_gpuwire.so" ]; then
        pass "mca_${c}_gpuwire.so in $CPKGLIB"
    else
        fail "mca_${c}_gpuwire.so is not in the chroot's Open MPI component folder $CPKGLIB"
    fi
done
# The components load the core from beside them (RUNPATH $ORIGIN).
if [ -f "$R$CPKGLIB/libgpuwire_core.so" ]; then
    pass "libgpuwire_core.so beside the components in $CPKGLIB"
else
    fail "libgpuwire_core.so is not beside the components in $CPKGLIB"
fi
# The preload library uses that same core (its RUNPATH names the component
# folder), so a rank that preloads it still loads one core.
PRELOAD_CORE=$(in_chroot "$R" "ldd $PRELOAD" 2>&1 | awk '/libgpuwire_core\.so/ { print $3 }')
if [ -n "$PRELOAD_CORE" ] &&
        [ "$(in_chroot "$R" "readlink -f $PRELOAD_CORE")" = "$(in_chroot "$R" "readlink -f $CPKGLIB/libgpuwire_core.so")" ]; then
    pass "$PRELOAD finds the core of $CPKGLIB"
else
    fail "$PRELOAD finds libgpuwire_core.so at '${PRELOAD_CORE:-nowhere}', not in $CPKGLIB"
fi

in_chroot "$R" "ompi_info" >"$TMP/ompi_info.txt" 2>&1 || fail "ompi_info exited with $?"
for c in pml coll; do
    line=$(grep -E "MCA $c: gpuwire " "$TMP/ompi_info.txt" | head -1 | sed 's/^ *//')
    if [ -n "$line" ]; then pass "ompi_info: $line"; else fail "ompi_info lists no $c gpuwire"; fi
done

MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
t=$(now)
rc=0
in_chroot "$R" "$MPIRUN --mca pml gpuwire --mca pml_base_verbose 10 /opt/gpuwire-test/deb_pingpong" \
    >"$TMP/run1.txt" 2>&1 || rc=$?
selected=$(grep -c 'select: component gpuwire selected' "$TMP/run1.txt" || true)
if [ "$rc" -eq 0 ] && [ "$selected" -eq 2 ] && grep -q '^deb_pingpong: ok' "$TMP/run1.txt"; then
    pass "mpirun --mca pml gpuwire: both ranks selected pml gpuwire; $(grep '^deb_pingpong: ok' "$TMP/run1.txt" | sed 's/^deb_pingpong: ok: //')"
else
    fail "mpirun --mca pml gpuwire: rc=$rc, $selected rank(s) selected pml gpuwire; the output:"
    grep -v 'mca: base: \|select: \|pml:base' "$TMP/run1.txt" | head -20
fi

rc=0
in_chroot "$R" "$MPIRUN --mca pml gpuwire --mca coll gpuwire,tuned,libnbc,basic,self \
    --mca coll_base_verbose 10 -x LD_PRELOAD=$PRELOAD /opt/gpuwire-test/deb_pingpong 1" \
    >"$TMP/run2.txt" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && grep -q '^deb_pingpong: ok' "$TMP/run2.txt" &&
        grep -q 'comm_select: component available: gpuwire' "$TMP/run2.txt"; then
    pass "with --mca coll gpuwire,... and LD_PRELOAD=$PRELOAD: coll gpuwire available, MPIX_Query_cuda_support() = 1"
else
    fail "with coll gpuwire and the preload library: rc=$rc; the output:"
    grep -v 'coll:base:\|mca: base: ' "$TMP/run2.txt" | head -20
fi

rc=0
in_chroot "$R" "gpuwire-info" >"$TMP/info.txt" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && grep -q "$CPKGLIB" "$TMP/info.txt"; then
    pass "gpuwire-info runs and names $CPKGLIB"
else
    fail "gpuwire-info: rc=$rc; the output began:"
    head -10 "$TMP/info.txt"
fi
say "runs: $(( $(now) - t )) s"

# ---------------------------------------------------------------------------
# 4. Remove
# ---------------------------------------------------------------------------
in_chroot "$R" "apt-get remove -y -q gpuwire" >"$TMP/remove.log" 2>&1 || fail "apt-get remove gpuwire failed"
if [ -e "$R$CPKGLIB/mca_pml_gpuwire.so" ] || [ -e "$R$CPKGLIB/mca_coll_gpuwire.so" ] ||
        [ -e "$R$CPKGLIB/mca_osc_gpuwire.so" ] ||
        [ -e "$R$CPKGLIB/libgpuwire_core.so" ] ||
        in_chroot "$R" "ompi_info" 2>&1 | grep -q ' gpuwire '; then
    fail "after apt-get remove gpuwire, Open MPI still finds gpuwire"
else
    pass "apt-get remove gpuwire: the components are gone"
fi

say "total: $(( $(now) - T0 )) s, $failures failure(s)"
[ "$failures" -eq 0 ]
