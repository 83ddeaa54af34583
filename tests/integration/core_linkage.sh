#!/bin/sh
# The components (pml, coll, osc) load the one libgpuwire_core.so from beside them: each has
# NEEDED libgpuwire_core.so and a RUNPATH with $ORIGIN, and neither (nor the
# core) needs libstdc++ (linked statically, hidden). The core exports only its
# C API (gw_*).
# Usage: core_linkage.sh <readelf> <nm> <core> <component>...
set -u
READELF=$1 NM=$2 CORE=$3
shift 3
fails=0
fail() { echo "core_linkage: FAIL: $*"; fails=$((fails + 1)); }
for so in "$@"; do
    dyn=$("$READELF" -d "$so") || { fail "readelf -d $so failed"; continue; }
    echo "$dyn" | grep -E '\((NEEDED|RUNPATH|RPATH)\)' | sed "s|^|$(basename "$so"): |"
    echo "$dyn" | grep -q '(NEEDED).*\[libgpuwire_core\.so' ||
        fail "$so: no NEEDED libgpuwire_core.so"
    echo "$dyn" | grep '(RUNPATH)' | grep -q '\$ORIGIN' ||
        fail "$so: no RUNPATH with \$ORIGIN (the core beside it would not be found)"
    [ "$(dirname "$so")" = "$(dirname "$CORE")" ] ||
        fail "$so: not in the core's folder $(dirname "$CORE")"
done
for so in "$CORE" "$@"; do
    "$READELF" -d "$so" | grep -q '(NEEDED).*libstdc++' && fail "$so needs libstdc++"
done
others=$("$NM" -D --defined-only "$CORE" | awk '{ print $NF }' | grep -v '^gw_' | head -5)
[ -z "$others" ] || fail "the core exports more than gw_*: $others"
"$NM" -D --defined-only "$CORE" | grep -q ' gw_core_counters$' ||
    fail "the core does not export gw_core_counters"
[ "$fails" -eq 0 ] && echo "core_linkage: ok"
[ "$fails" -eq 0 ]
