#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease BD".) Lease BD (any card; more on an H200): main's tensor-core page loops verified
# and, on the bar's card, measured (docs/perf.md "Where the persistent kernel goes next (after
# the thirty-sixth session)", predictions there and in "The O-projection and down on the tensor
# cores as main's code"). The GPU tests first (the operator checks and the attention probe now
# read attention's output and h through backend/src/fragments.rs: their first GPU run), then
# main against bfdf8c5's kernels, the transformers check of both targets, and the held ladder;
# then tools/variants/direct_fragments.py (now in 6c5c760) against main; on an H200 also the stream cap 4 and
# `mkc probe latency` (lease AX's branch). Files (.device/): mkc, gpu_test (built from the same
# commit), v_old.cu (`git show bfdf8c5:backend/kernels/mkc.cu`) and old.ron
# (`Tuning(kernels_cu: Some(".device/v_old.cu"))`), v_direct.cu (`python3
# tools/variants/direct_fragments.py > .device/v_direct.cu`) and direct.ron (the same for it).
LIMIT=420 ARCHIVE=bd.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
gpu_tests
b main_a; b old_a --tune .device/old.ron
b main_b; b old_b --tune .device/old.ron
timeout 200 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1; echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_llama1b.log | tail -6; keep
b direct_a --tune .device/direct.ron; b main_d; b direct_b --tune .device/direct.ron
[ $SECONDS -lt $LIMIT ] && { timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1; echo "ladder rc=$?"; grep -E "^  persistent" $W/ladder_held.log; keep; }
if grep -q H200 $W/gpu.txt; then
    S4=$W/s4.ron; echo "Tuning(persistent_stream_inflight: Some(4))" > $S4
    b s4_a --tune $S4; b main_c
    timeout 60 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
fi
