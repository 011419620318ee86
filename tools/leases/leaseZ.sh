#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease Z: which part of page-major weights the H200's persistent step lost 17 µs to (lease
# Y). Alternating processes, `mkc bench models/llama1b_tuned.ron --targets persistent,pdl
# --trials 2`: 6af8708 (.device/mkc_base, row-major), main (page-major), main with down
# row-major again (`natural_layout.py down`, .device/nat_down.ron) and with up/gate row-major
# again (`natural_layout.py up_gate`, .device/nat_up_gate.ron), two rounds; the GPU tests first.
LIMIT=250 ARCHIVE=z.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
gpu_tests
for r in 1 2; do
    M=.device/mkc_base b base$r; b pm$r; b natd$r --tune .device/nat_down.ron; b natug$r --tune .device/nat_up_gate.ron
done
