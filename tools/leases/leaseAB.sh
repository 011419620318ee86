#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AB: lease AA's comparison again, two rounds and no GPU tests (they passed on this
# binary in lease AA), in the hope of an H200: main against 6af8708 (.device/mkc_base),
# alternating processes, `mkc bench models/llama1b_tuned.ron --targets persistent,pdl --trials 2`.
LIMIT=120 ARCHIVE=ab.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
for r in 1 2; do
    M=.device/mkc_base b base$r; b main$r
done
