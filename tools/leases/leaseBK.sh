#!/bin/bash
# (Not yet run.) Lease BK (an H200 only): issue 18's bar measured again on main as it now is
# (last H200 figures: lease AF, persistent 750.4-751.7 µs, pdl 720.8-722.0). Alternated twice
# with main (12 ring slots at P32/D128, pdl in its process):
# - the stream cap of 4 copies per SM outside boundaries (the h100 profile's
#   `persistent_stream_inflight`, never run on an H200 with the hold; .device/s4.ron);
# - 4 copies in flight while the O-projection waits for attention (`tools/variants/long_wait.py
#   4`, never run on an H200; .device/lw4.ron + v_lw4.cu), persistent only;
# Then the GPU tests, 11 slots once (.device/s11.ron), `mkc probe latency` (the one-copy L2
# hit the h200 profile lacks, for the simulator's latency line) and, as time allows, one traced step of
# main (never traced on an H200), the held ladder with the chain split (never run on an H200) and one traced
# step of its last rung (.device/allrm.ron + v_allrm.cu: the ablation macros' defines above
# main's mkc.cu, under `#ifdef MKC_PERSISTENT`). docs/perf.md "Leases BI, BJ, BL, BM", "Lease
# BK gains the H200's stream cap", "Lease BK on the H200, the forty-first session's additions"
# and "Data that flags itself". Main is 0279ae1's kernels (leases BS, BV, BW, BX); v_lw4.cu
# and v_allrm.cu are made from them. Also .device/: mkc, gpu_test.
LIMIT=480 ARCHIVE=bk.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
grep -q H200 $W/gpu.txt || { echo "not an H200"; exit; }
for r in a b; do
    b main_$r
    b s4_$r --tune .device/s4.ron
    TARGETS=persistent b lw4_$r --tune .device/lw4.ron
done
gpu_tests
b s11 --tune .device/s11.ron
probe_latency
traced main
[ $SECONDS -lt $LIMIT ] && { timeout 150 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder.log 2>&1; echo "ladder rc=$? t=$SECONDS"; grep -E "^  persistent" $W/ladder.log; keep; }
traced allrm --no-check --tune .device/allrm.ron
