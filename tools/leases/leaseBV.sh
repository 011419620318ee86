#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BV".) Lease BV (any card; an H200 runs lease BK whole instead): split-KV's merge batch
# capped at the groups a thread has (2 parts: 3 groups' registers, not 6; k_persistent 252 ->
# 218 registers at 2 parts) against f9f8db0's kernels (.device/prev.ron + v_prev.cu), with 2
# parts at P32 (.device/kv2.ron), persistent and pdl in one process, alternated twice; then 4
# parts at P32 (.device/kv4.ron: the same batch) and main once each way, and the GPU tests on
# the new build (docs/perf.md "Split-KV's merge batch no larger than a thread's groups").
# Also .device/: mkc, gpu_test.
grep -q H200 <(nvidia-smi --query-gpu=name --format=csv,noheader) && exec bash tools/leases/leaseBK.sh
LIMIT=300 ARCHIVE=bv.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    T=.device/kv2.ron b kv2_$r
    T=.device/kv2.ron b kv2prev_$r --tune .device/prev.ron
done
T=.device/kv4.ron b kv4
T=.device/kv4.ron b kv4prev --tune .device/prev.ron
b main
b mainprev --tune .device/prev.ron
gpu_tests
