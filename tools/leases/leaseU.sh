#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease U: the eleventh ring slot (norm weights read from L2; docs/perf.md "An eleventh ring
# slot"). Alternating processes, `mkc bench models/llama1b_tuned.ron --targets persistent,pdl
# --trials 2`: the binary of edd8958 (.device/mkc_base, 10 slots) against this commit's
# (.device/mkc, 11 slots), and the new binary held at 10 slots (.device/s10.ron:
# Tuning(persistent_slots: Some(10))), three rounds; the GPU tests first (.device/gpu_test).
LIMIT=300 ARCHIVE=u.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
gpu_tests
for r in 1 2 3; do
    M=.device/mkc_base b base$r; b new$r; b s10_$r --tune .device/s10.ron
done
