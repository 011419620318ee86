#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BW".) Lease BW (any card; an H200 runs lease BK whole instead): split-KV's merge writes
# the merged input as the tensor cores' fragments (no stage_fragments pass and two barriers
# after it) against the kernels before it (.device/prev.ron + v_prev.cu: `git show
# 0058e25:backend/kernels/mkc.cu`), persistent and pdl in one process: 2 parts at P32
# (.device/kv2.ron, checked) alternated twice, 4 parts at P32 (.device/kv4.ron, checked) once
# each way, then the workload's 4 parts at P1024/T64 (unchecked) once each way; then the GPU
# tests on the new build (docs/perf.md "Split-KV's merge as fragments"). Also .device/: mkc,
# gpu_test.
grep -q H200 <(nvidia-smi --query-gpu=name --format=csv,noheader) && exec bash tools/leases/leaseBK.sh
LIMIT=330 ARCHIVE=bw.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    T=.device/kv2.ron b kv2_$r
    T=.device/kv2.ron b kv2prev_$r --tune .device/prev.ron
done
T=.device/kv4.ron b kv4
T=.device/kv4.ron b kv4prev --tune .device/prev.ron
gpu_tests
BT=150 b long --prompt-len 1024 --tokens 64 --no-check
BT=150 b longprev --prompt-len 1024 --tokens 64 --no-check --tune .device/prev.ron
