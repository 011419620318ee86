#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AH: `tools/variants/long_wait.py` 4 and 8 on whatever card comes (lease AG's H100
# fallback): alternating with main, persistent only. Files: .device/lw4.ron, .device/lw8.ron
# and their .cu.
LIMIT=200 ARCHIVE=ah.tgz
source tools/leases/common.sh
for r in 1 2; do b main$r; b lw4_$r --tune .device/lw4.ron; b lw8_$r --tune .device/lw8.ron; done
