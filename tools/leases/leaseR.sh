#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease R: activation words (the consumer polls the data, no counter, no release) against the
# previous commit's counters, in alternating processes on one card, pdl beside each; the GPU
# tests (the watchdog now names a word), the transformers check, a traced step and the
# ablation ladder of the new build. docs/perf.md "Activation words".
#   .device/mkc_base: the release binary of 6e99db2 (counters), stripped.
LIMIT=330 ARCHIVE=r.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b words_a
TARGETS=persistent,pdl M=.device/mkc_base b counters_a
TARGETS=persistent,pdl b words_b
TARGETS=persistent,pdl M=.device/mkc_base b counters_b
( time timeout 90 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked|stalled" $W/gpu_test.log | head -6; keep
[ $SECONDS -lt 400 ] && { timeout 150 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1; echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|note" $W/hf_llama1b.log | tail -6; keep; }
[ $SECONDS -lt 460 ] && { timeout 80 $M bench $T --targets persistent --trials 1 --timeline $W/trace.json > $W/trace.log 2>&1; echo "trace rc=$?"; grep -A12 'us per SM' $W/trace.log | head -14; grep -i edge -A7 $W/trace.log | head -9; keep; }
[ $SECONDS -lt 500 ] && { timeout 90 $M bench $T --targets persistent --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -14 $W/ablate.log; keep; }
