#!/bin/sh
# The built components carry the hardening a distribution package would:
# full RELRO (a GNU_RELRO segment and immediate binding), stack protection
# (__stack_chk_fail imported) and fortified libc calls (some __*_chk import).
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
    echo "$dyn" | grep -Eq 'BIND_NOW|FLAGS_1.*NOW' || { echo "FAIL: $name: not linked with -z now"; fail=1; }
    echo "$syms" | grep -q '__stack_chk_fail' || { echo "FAIL: $name: no stack protection"; fail=1; }
    chk=$(echo "$syms" | grep -Eo '__[a-z_]+_chk' | grep -v '^__stack_chk' | sort -u | tr '\n' ' ')
    [ -n "$chk" ] || { echo "FAIL: $name: no fortified libc call"; fail=1; }
    [ "$fail" -eq "$before" ] && echo "$name: RELRO, BIND_NOW, stack protector, fortified: $chk"
done
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
