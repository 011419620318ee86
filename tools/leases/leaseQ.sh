#!/bin/bash
# Lease Q: lease P's H200 branch alone (an H100 runs nothing): main (no limit) twice, the
# release-only window at K = 1 twice, the full window at K = 9. docs/perf.md "Lease Q".
LIMIT=120 ARCHIVE=q.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
b main_a; b rw1a --tune .device/rw1.ron; b k9 --tune .device/bi9.ron; b main_b; b rw1b --tune .device/rw1.ron
