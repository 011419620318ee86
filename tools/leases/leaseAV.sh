#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AV".) Lease AV (any card): two copies in the boundary window under the stream cap
# (docs/perf.md "Two copies in the window under the cap"). The tune files (written here) set
# the window's K and the cap C outside it. H100 (main K = 1, C = 4): K = 2 with C = 4 and 3,
# two alternating rounds. H200 (main K = 1, no cap): C = 4, and K = 2 with C = 4, then the
# held ladder and `mkc probe latency`. Files: .device/mkc.
LIMIT=400 ARCHIVE=av.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
mk() { echo "Tuning(persistent_boundary_inflight: Some($2), persistent_stream_inflight: Some($3))" > $W/$1.ron; }
mk k1c4 1 4; mk k2c4 2 4; mk k2c3 2 3
if grep -q H200 $W/gpu.txt; then
    b main_a; b k1c4_a --tune $W/k1c4.ron; b k2c4_a --tune $W/k2c4.ron
    b main_b; b k1c4_b --tune $W/k1c4.ron; b k2c4_b --tune $W/k2c4.ron
    timeout 100 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1
    echo "ladder held rc=$?"; grep -E "^  persistent" $W/ladder_held.log; keep
    timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -16 $W/latency.log; keep
else
    b main_a; b k2c4_a --tune $W/k2c4.ron; b k2c3_a --tune $W/k2c3.ron
    b main_b; b k2c4_b --tune $W/k2c4.ron; b k2c3_b --tune $W/k2c3.ron
    b main_c; b k2c4_c --tune $W/k2c4.ron
fi
