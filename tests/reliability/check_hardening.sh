#!/bin/sh
# The built components carry the hardening a Debian package gets by default:
# RELRO (a GNU_RELRO segment), stack protection (__stack_chk_fail imported)
# and fortified libc calls (some __*_chk import). Not immediate binding (-z
# now): a component of another Open MPI release must load far enough to
# refuse with one line, so it must not bind that release's symbols at load.
#   check_hardening.sh <shared object>...
set -u
command -v readelf >/dev/null || { echo "SKIP: readelf not found"; exit 77; }
fail=0
for so in "$@"; do
    name=$(basename "$so")
    before=$fail
    segs=$(readelf -lW "$so") || { echo "FAIL: $name: readelf failed"; fail=1; continue; }
    dyn=$(readelf -dW "$so")
    syms=$(readelf --dyn-syms -W "$so")
    echo "$segs" | grep -q GNU_RELRO || { echo "FAIL: $name: no GNU_RELRO segment"; fail=1; }
    if echo "$dyn" | grep -Eq 'BIND_NOW|FLAGS_1.*NOW'; then
        echo "FAIL: $name: linked with -z now (the refusal to load into another release needs lazy binding)"
        fail=1
    fi
    echo "$syms" | grep -q '__stack_chk_fail' || { echo "FAIL: $name: no stack protection"; fail=1; }
    chk=$(echo "$syms" | grep -Eo '__[a-z_]+_chk' | grep -v '^__stack_chk' | sort -u | tr '\n' ' ')
    [ -n "$chk" ] || { echo "FAIL: $name: no fortified libc call"; fail=1; }
    [ "$fail" -eq "$before" ] && echo "$name: RELRO, lazy binding, stack protector, fortified: $chk"
done
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
