#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease N: on an H200, K = 9 against main (no limit there) twice, and K = 6; on an H100, main
# (K = 1 now) against K = 2 twice. docs/perf.md "Lease N".
LIMIT=150 ARCHIVE=n.tgz
source tools/leases/common.sh
if grep -q H200 $W/gpu.txt; then
    b main_a; b k9a --tune .device/bi9.ron; b main_b; b k9b --tune .device/bi9.ron; b k6 --tune .device/bi6.ron
else
    b main_a; b k2a --tune .device/bi2.ron; b main_b; b k2b --tune .device/bi2.ron
fi
