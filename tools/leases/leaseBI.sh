#!/bin/bash
# (Run 2026-12-07 on an H100 at deb9720: docs/perf.md "Leases BI, BJ, BL, BM".) Lease BI (any card): why lease BH's operator check of split-KV attention failed
# (3 parts, 96 CTAs, `attn` rel L2 inf, where the end-to-end checks at 2 and 4 parts passed). The
# check now also compares the partial records themselves and names the worst one (head, part,
# maximum and sum against the CPU's, NaN outputs), beside 3 and 4 parts of one chunk each (a
# 512-position history), and llama3b's 128-wide heads in 8 one-chunk parts. Then the 1,024-token run at 2 parts with the
# CPU reference check: its parts span two attention chunks each, as the failed check's did,
# which no checked run has covered. Then two traced steps (`--timeline`, persistent, main's
# P32/D128): the ladder's last rung (every kind of work removed: 238-242 µs in lease BG, where
# the model says 49.5) and the weights rung (the chain alone, 456-459), built from variants of
# mkc.cu that define the ablation macros, so that the trace says whether the rest is per
# instruction or per page. docs/perf.md "Lease BH", "Lease BG". Files (.device/): mkc, gpu_test,
# kv2.ron, v_allrm.cu and allrm.ron, v_wonly.cu and wonly.ron (the macros' defines above
# backend/kernels/mkc.cu, under `#ifdef MKC_PERSISTENT`; `Tuning(kernels_cu: ...)`).
LIMIT=260 ARCHIVE=bi.tgz
source tools/leases/common.sh
timeout 150 .device/gpu_test --test-threads 1 every_operator > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -E "attention|worst|test result|panicked" $W/gpu_test.log | head -30; keep
tr() {  # NAME TUNE: one traced step of the persistent target with that build
    [ $SECONDS -gt $LIMIT ] && { echo "$1 skipped (time)"; return; }
    timeout 90 $M bench $T --targets persistent --trials 1 --no-check --tune $2 --timeline $W/$1.json > $W/$1.log 2>&1; echo "$1 rc=$? t=$SECONDS"
    grep -E "^  persistent" $W/$1.log | head -2; grep -A12 'us per SM' $W/$1.log | head -14; keep
}
tr allrm .device/allrm.ron
tr wonly .device/wonly.ron
[ $SECONDS -gt 150 ] && { echo "long_kv2 skipped (time)"; exit; }
timeout 150 $M bench .device/kv2.ron --targets persistent,pdl --trials 1 --prompt-len 1024 --tokens 64 > $W/long_kv2.log 2>&1; echo "long_kv2 rc=$? t=$SECONDS"
grep -E "floor|^  persistent|^  pdl|FAIL|PASS|rror|stall|growth" $W/long_kv2.log; keep
