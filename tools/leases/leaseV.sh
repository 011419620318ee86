#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease V: this commit's kernels (the norm weights read from L2 by every target: the
# persistent kernel's eleventh slot, the chain's producers without norm copies) against
# edd8958's (.device/mkc_base), alternating processes, `mkc bench models/llama1b_tuned.ron
# --targets persistent,pdl --trials 2`, three rounds; the GPU tests first; then the boundary
# limit on the new kernel, K = 2 and 16 (.device/biK.ron), against the card's default.
LIMIT=330 ARCHIVE=v.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
gpu_tests
for r in 1 2 3; do
    M=.device/mkc_base b base$r; b new$r
done
TARGETS=persistent
for k in 2 16; do b k$k --tune .device/bi$k.ron; done
b new4
