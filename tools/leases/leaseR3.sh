#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease R3: activation words behind relaxed counters (the counter says when to read, the words
# check it; no release). Against the counters' binary of 6e99db2, alternating processes,
# pdl beside each; a traced step, the GPU tests, the ablation ladder and the transformers check
# if time is left. docs/perf.md "Activation words".
#   .device/mkc_base: the release binary of 6e99db2 (counters), stripped.
LIMIT=330 ARCHIVE=r3.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b words_a
TARGETS=persistent,pdl M=.device/mkc_base b counters_a
TARGETS=persistent,pdl b words_b
TARGETS=persistent,pdl M=.device/mkc_base b counters_b
timeout 80 $M bench $T --targets persistent --trials 1 --timeline $W/trace.json > $W/trace.log 2>&1; echo "trace rc=$?"; grep -A12 'us per SM' $W/trace.log | head -14; keep
timeout 80 .device/mkc_base bench $T --targets persistent --trials 1 --timeline $W/trace_base.json > $W/trace_base.log 2>&1; echo "trace base rc=$?"; grep -A12 'us per SM' $W/trace_base.log | head -14; keep
( time timeout 90 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked|stalled" $W/gpu_test.log | head -6; keep
[ $SECONDS -lt 420 ] && { timeout 90 $M bench $T --targets persistent --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -10 $W/ablate.log; keep; }
[ $SECONDS -lt 400 ] && { timeout 150 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1; echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|note" $W/hf_llama1b.log | tail -6; keep; }
