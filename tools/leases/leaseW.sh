#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease W: one bulk copy of the K history (`tools/variants/kv_one_copy.py`, .device/kv1.ron:
# Tuning(kernels_cu: Some(".device/v_kv1.cu"))) against main, alternating processes, `mkc
# bench models/llama1b_tuned.ron --targets persistent,pdl --trials 2`, three rounds.
# docs/perf.md "One copy of the K history".
LIMIT=240 ARCHIVE=w.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
for r in 1 2 3; do
    b main$r; b kv1_$r --tune .device/kv1.ron
done
