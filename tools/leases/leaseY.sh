#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease Y: page-major weights (every page one bulk copy) against 6af8708 (.device/mkc_base),
# alternating processes, `mkc bench models/llama1b_tuned.ron --targets persistent,pdl --trials
# 2`, three rounds; the GPU tests first; the transformers check (a checkpoint's weights take
# the upload path into the page-major store) last. docs/perf.md "Page-major weights".
LIMIT=260 ARCHIVE=y.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
gpu_tests
for r in 1 2 3; do
    M=.device/mkc_base b base$r; b new$r
done
timeout 170 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1; echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|note" $W/hf_llama1b.log | tail -6; keep
