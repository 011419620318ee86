#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease U2: pdl with the norm weights read from L2 too. Lease U measured this commit's chain
# kernels 3.5 µs slower than edd8958's (the norm wait moved before the residual loads, the
# weights preloaded into registers from the producer's shared-memory copy). Alternating
# processes, `mkc bench models/llama1b_tuned.ron --targets pdl --trials 2`: edd8958's binary
# (.device/mkc_base), this commit's (.device/mkc), and this commit's with
# `tools/variants/chain_norm_l2.py` (.device/cn.ron: Tuning(kernels_cu:
# Some(".device/v_chain_norm.cu"))), three rounds.
LIMIT=200 ARCHIVE=u2.tgz TARGETS=pdl
source tools/leases/common.sh
for r in 1 2 3; do
    M=.device/mkc_base b base$r; b new$r; b cn$r --tune .device/cn.ron
done
