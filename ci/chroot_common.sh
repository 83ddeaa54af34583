# Shared by the scripts that test gpuwire inside a Debian chroot
# (ci/ompi5_chroot.sh, ci/deb_chroot.sh). Sourced, not run: the caller sets
# CHROOT_NAME (the prefix of every message) first.
#
# Environment: GPUWIRE_DEBIAN_MIRROR  the mirror for debootstrap (default: the
#              one the host's apt uses)

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() { printf '%s: %s\n' "$CHROOT_NAME" "$*"; }
die() { printf '%s: FAIL: %s\n' "$CHROOT_NAME" "$*" >&2; exit 1; }
now() { date +%s; }

# Unmounts everything at or below $1, deepest first.
unmount_below() {
    for m in $(awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
}

# chroot_lock <root>: one run at a time per chroot (holds fd 9 until exit).
chroot_lock() {
    exec 9>"$1.lock"
    if ! flock -n 9; then
        say "waiting for another run to release $1.lock"
        _t=$(now)
        flock -w 1800 9 || die "another run still holds $1.lock; wait for it or end it"
        say "waited $(( $(now) - _t )) s"
    fi
}

# in_chroot <root> <shell command>: runs it with a clean environment.
in_chroot() {
    chroot "$1" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /bin/sh -c "$2"
}

# mount_system <root>: what Open MPI needs of /proc, /sys and /dev/shm.
mount_system() {
    mkdir -p "$1/proc" "$1/sys" "$1/dev/shm"
    mount -t proc proc "$1/proc"
    mount -t sysfs -o ro sysfs "$1/sys"      # hwloc reads the topology there
    mount -t tmpfs -o mode=1777 tmpfs "$1/dev/shm"
}

# The Debian mirror the host's apt uses (debootstrap must reach the same one).
debian_mirror() {
    if [ -n "${GPUWIRE_DEBIAN_MIRROR:-}" ]; then
        echo "$GPUWIRE_DEBIAN_MIRROR"
        return
    fi
    _m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
            /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -v '^[[:space:]]*#' | grep -oE '(https?|ftp)://[^ ]+/debian/?( |$)' |
        grep -v security | head -1 | tr -d ' ') || true
    echo "${_m:-http://deb.debian.org/debian}"
}

# have_debootstrap: installs it (and Debian's keyring) where apt-get can;
# fails when it is still missing.
have_debootstrap() {
    if ! command -v debootstrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y -qq --no-install-recommends debootstrap debian-archive-keyring \
            >/dev/null 2>&1 || true
    fi
    command -v debootstrap >/dev/null 2>&1
}

# chroot_is_current <root> <suite> <mirror>: true when <root> holds a Debian
# made by chroot_debootstrap from the same suite and mirror (or one made
# before such trees were stamped).
chroot_is_current() {
    [ -x "$1/usr/bin/apt-get" ] || return 1
    [ -f "$1/etc/gpuwire-debootstrap" ] || return 0
    [ "$(cat "$1/etc/gpuwire-debootstrap")" = "debootstrap $2 $3" ]
}

# chroot_debootstrap <root> <suite> <mirror> <log>: a minimal Debian <suite>
# in <root>, replacing what is there. Needs debootstrap (have_debootstrap).
chroot_debootstrap() {
    _keyring=""
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
        _keyring=--keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    say "debootstrap $2 from $3 into $1"
    # Never delete through a mount (callers bind-mount things in there).
    [ -z "$(awk -v r="$1" 'index($2, r) == 1' /proc/mounts)" ] ||
        die "something is still mounted below $1; not deleting it"
    rm -rf "$1.partial" "$1"
    _t=$(now)
    debootstrap --variant=minbase $_keyring "$2" "$1.partial" "$3" >"$4" 2>&1 || {
        tail -5 "$4" >&2
        die "debootstrap of Debian $2 from $3 failed (set GPUWIRE_DEBIAN_MIRROR to a reachable mirror)"
    }
    echo "debootstrap $2 $3" >"$1.partial/etc/gpuwire-debootstrap"
    mv "$1.partial" "$1"
    say "debootstrap: $(( $(now) - _t )) s"
}
