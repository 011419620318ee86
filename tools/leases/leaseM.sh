#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease M: on an H200, K = 9 against the unlimited producer (main there) and K = 6; on an H100,
# K = 1 against 2 (main there), which lease I ran once. docs/perf.md "Lease M".
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 1, 2, 6, 9, 16)
LIMIT=200 ARCHIVE=m.tgz
source tools/leases/common.sh
if grep -q H200 $W/gpu.txt; then
    b main_a; b k9a --tune .device/bi9.ron; b main_b; b k9b --tune .device/bi9.ron; b k6 --tune .device/bi6.ron
else
    b main_a; b k1a --tune .device/bi1.ron; b main_b; b k1b --tune .device/bi1.ron
fi
