#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease K: main's per-card default on the H200 (its profile sets no boundary limit: the
# unlimited producer) with pdl beside it twice; the limit at K = 6 and 9 (does its loss shrink
# with K, or is it the mechanism's?); the backend's GPU tests and the transformers check on this
# build. docs/perf.md "Lease K".
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 6, 9)
LIMIT=400 ARCHIVE=k.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b main_pdl1
b k9a --tune .device/bi9.ron
b k6a --tune .device/bi6.ron
TARGETS=persistent,pdl b main_pdl2
b k9b --tune .device/bi9.ron
b k6b --tune .device/bi6.ron
( time timeout 90 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked" $W/gpu_test.log | head -5; keep
if [ $SECONDS -lt 420 ]; then
    timeout 170 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1
    echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|note" $W/hf_llama1b.log | tail -6; keep
fi
