#!/bin/sh
# Out-of-range MCA parameter values: each component prints one line per process
# naming the parameter, its value and the allowed range, and declines. Under
# --mca pml gpuwire Open MPI then has no PML and mpirun exits nonzero with its
# own "PML gpuwire cannot be selected"; a declined coll gpuwire leaves the job
# running on the other coll components. Values at the edges of the ranges are
# accepted. Every run must end within 30 s.
#   param_range.sh <mpirun> <program> <mpirun flags...>
set -u
MPIRUN=$1 PROG=$2
shift 2
NP=2
fail=0

# run <expect: fail|ok> <label> <mca name value>...: sets $out and $rc
run() {
    expect=$1 label=$2
    shift 2
    out=$(timeout 30 "$MPIRUN" -np $NP "$@" "$PROG" 2>&1)
    rc=$?
    if [ $rc -eq 124 ]; then
        echo "FAIL [$label]: still running after 30 s"
        fail=1
        return 1
    fi
    if [ "$expect" = fail ] && [ $rc -eq 0 ]; then
        echo "FAIL [$label]: mpirun exited 0 although pml gpuwire had to decline"
        fail=1
        return 1
    fi
    if [ "$expect" = ok ] && [ $rc -ne 0 ]; then
        echo "FAIL [$label]: mpirun exited $rc; output:"
        echo "$out" | head -20
        fail=1
        return 1
    fi
    return 0
}

# expect_line <label> <fixed string> [min]: the string must appear on one line per
# process, at least min (default all) of them: mpirun may end the other
# processes of a job whose MPI_Init failed before they print, and prints a
# message sent through Open MPI's help system once for all processes.
expect_line() {
    n=$(echo "$out" | grep -cF -- "$2")
    if [ "$n" -lt "${3:-$NP}" ] || [ "$n" -gt $NP ]; then
        echo "FAIL [$1]: expected ${3:-$NP} to $NP lines containing: $2"
        echo "got $n; output was:"
        echo "$out" | head -20
        fail=1
    else
        echo "PASS [$1]: $(echo "$out" | grep -F -- "$2" | head -1 | sed 's/^\[[^]]*\] //')"
    fi
}

expect_absent() {
    if echo "$out" | grep -q "out of range"; then
        echo "FAIL [$1]: a value inside its range was refused:"
        echo "$out" | grep "out of range" | head -3
        fail=1
    fi
}

expect_ran() {
    n=$(echo "$out" | grep -c ': ok$')
    if [ "$n" -ne $NP ]; then
        echo "FAIL [$1]: $n of $NP processes ran the program; output:"
        echo "$out" | head -20
        fail=1
    fi
}

# Open MPI's own refusal: 4.1 prints both lines, 5.0 the first.
ompi_refused() {
    if ! echo "$out" | grep -qE "No components were able to be opened in the pml framework|PML gpuwire cannot be selected"; then
        echo "FAIL [$1]: Open MPI did not report that no PML could be opened; output:"
        echo "$out" | head -20
        fail=1
    fi
}

L=negative_threshold
if run fail $L "$@" --mca pml_gpuwire_ipc_threshold -1; then
    expect_line $L "pml:gpuwire: declined: pml_gpuwire_ipc_threshold = 18446744073709551615 (-1 read as signed: negative values are not allowed) is out of range: allowed 0 to 1099511627776" 1
    ompi_refused $L
fi

L=zero_cache_entries
if run fail $L "$@" --mca pml_gpuwire_ipc_cache_entries 0; then
    expect_line $L "pml:gpuwire: declined: pml_gpuwire_ipc_cache_entries = 0 is out of range: allowed 1 to 1048576" 1
    ompi_refused $L
fi

L=negative_priority
if run fail $L "$@" --mca pml_gpuwire_priority -5; then
    expect_line $L "pml:gpuwire: declined: pml_gpuwire_priority = -5 is out of range: allowed 0 to 1000" 1
    ompi_refused $L
fi

L=two_bad_values
if run fail $L "$@" --mca pml_gpuwire_verbose 101 --mca pml_gpuwire_ipc_cache_bytes 0; then
    expect_line $L "pml_gpuwire_verbose = 101 is out of range: allowed 0 to 100" 1
    expect_line $L "pml_gpuwire_ipc_cache_bytes = 0 is out of range: allowed 1 to 1125899906842624" 1
fi

L=coll_declines
if run ok $L "$@" --mca coll gpuwire,tuned,libnbc,basic,self --mca coll_gpuwire_staging_bytes 2048G; then
    expect_line $L "coll:gpuwire: declined: coll_gpuwire_staging_bytes = 2199023255552 is out of range: allowed 0 to 1099511627776" 1
    expect_ran $L
fi

# osc gpuwire (built for Open MPI 4.1 only: GW_TEST_OSC=1 where it is).
L=osc_declines
if [ "${GW_TEST_OSC:-0}" = 1 ] &&
    run ok $L "$@" --mca osc gpuwire,pt2pt --mca osc_gpuwire_priority 1001; then
    expect_line $L "osc:gpuwire: declined: osc_gpuwire_priority = 1001 is out of range: allowed -1 to 1000" 1
    expect_ran $L
fi

L=edges_accepted
if run ok $L "$@" --mca coll gpuwire,tuned,libnbc,basic,self --mca pml_gpuwire_ipc_cache_entries 1 \
       --mca pml_gpuwire_rndv_threshold 1099511627776 --mca pml_gpuwire_priority 0 \
       --mca pml_gpuwire_verbose 0 --mca coll_gpuwire_priority -1 --mca coll_gpuwire_staging_bytes 0; then
    expect_absent $L
    expect_ran $L
fi

# Every value of pml_gpuwire_pace_mbps's range starts (DCQCN's constants are
# scaled to rates below 100 Gb/s; 1-199 used to fail MPI_Init); one above it
# is refused by the parameter's own check, naming the range and the smallest rate.
for R in 1 39 40 199 200 3200000; do
    L=pace_mbps_$R
    if run ok $L "$@" --mca pml_gpuwire_pace_mbps $R; then
        expect_absent $L
        expect_ran $L
        if echo "$out" | grep -q "dcqcn"; then
            echo "FAIL [$L]: the pacer refused its configuration:"
            echo "$out" | grep "dcqcn" | head -3
            fail=1
        fi
    fi
done
L=pace_mbps_above_range
if run fail $L "$@" --mca pml_gpuwire_pace_mbps 3200001; then
    expect_line $L "pml:gpuwire: declined: pml_gpuwire_pace_mbps = 3200001 is out of range: allowed 0 to 3200000; set it within the range or leave it unset for the default; 0 switches pacing off, the smallest rate is 1 (Mb/s)" 1
    ompi_refused $L
fi

# A misspelt parameter (Open MPI ignores it silently): rank 0 alone warns,
# once, naming the closest parameter, and the job runs; the environment form
# (OMPI_MCA_...) is what --mca becomes in the processes, so both are tested.
# expect_warning <label> <misspelt> <closest>
expect_warning() {
    n=$(echo "$out" | grep -cF -- "warning: $2 is not a parameter")
    m=$(echo "$out" | grep -F -- "warning: $2 is not a parameter" | grep -cF -- "did you mean $3?")
    if [ "$n" -ne 1 ] || [ "$m" -ne 1 ]; then
        echo "FAIL [$1]: expected one warning about $2 naming $3, got $n ($m naming it); output:"
        echo "$out" | head -20
        fail=1
    else
        echo "PASS [$1]: $(echo "$out" | grep -F -- "warning: $2" | sed 's/^\[[^]]*\] //')"
    fi
}
L=misspelt_pml
if run ok $L "$@" --mca pml_gpuwire_stat 1; then
    expect_warning $L pml_gpuwire_stat pml_gpuwire_stats
    expect_ran $L
fi
L=misspelt_env
export OMPI_MCA_pml_gpuwire_ipc_treshold=64k OMPI_MCA_coll_gpuwire_nvlink_timout=5
[ "${GW_TEST_OSC:-0}" = 1 ] && export OMPI_MCA_osc_gpuwire_lock_wrd=0
if run ok $L "$@" --mca coll gpuwire,tuned,libnbc,basic,self; then
    expect_warning $L pml_gpuwire_ipc_treshold pml_gpuwire_ipc_threshold
    expect_warning $L coll_gpuwire_nvlink_timout coll_gpuwire_nvlink_timeout
    [ "${GW_TEST_OSC:-0}" = 1 ] && expect_warning $L osc_gpuwire_lock_wrd osc_gpuwire_lock_word
    expect_ran $L
fi
unset OMPI_MCA_pml_gpuwire_ipc_treshold OMPI_MCA_coll_gpuwire_nvlink_timout OMPI_MCA_osc_gpuwire_lock_wrd
L=spelt_right
if run ok $L "$@" --mca coll gpuwire,tuned,libnbc,basic,self --mca pml_gpuwire_stats 0 \
       --mca pml_gpuwire_ipc_threshold 64k --mca coll_gpuwire_nvlink_timeout 5; then
    if echo "$out" | grep -q "is not a parameter"; then
        echo "FAIL [$L]: a parameter spelt right was reported:"
        echo "$out" | grep "is not a parameter" | head -3
        fail=1
    fi
    expect_ran $L
fi

exit $fail
