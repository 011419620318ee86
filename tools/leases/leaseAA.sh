#!/bin/bash
# (Run 2026-12-06 on an H100.)
# Lease AA: main as landed (split-K matrices page-major, gate/up row-major pairs) against
# 6af8708 (.device/mkc_base), alternating processes, `mkc bench models/llama1b_tuned.ron
# --targets persistent,pdl --trials 2`, three rounds; the GPU tests first.
LIMIT=200 ARCHIVE=aa.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
gpu_tests
for r in 1 2 3; do
    M=.device/mkc_base b base$r; b main$r
done
