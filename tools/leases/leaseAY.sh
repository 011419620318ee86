#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AY"; its variants are in commit a8d8596.) Lease AY (any card): two landed pages at once and half a page in the window
# (docs/perf.md "Two landed pages at once", "Half a page in the window"): main against
# tools/variants/pair_pages.py (three alternating rounds) and half_window.py (two); on an H200
# then lease AX's branch (the stream cap 4, probe latency, the held ladder). Files (.device/):
# mkc; v_pair.cu (`python3 tools/variants/pair_pages.py > .device/v_pair.cu`) and v_half.cu
# (`python3 tools/variants/half_window.py > .device/v_half.cu`), written from the mkc.cu the
# binary was built from; pair.ron and half.ron (`Tuning(kernels_cu: Some(".device/v_pair.cu"))`,
# and v_half.cu).
LIMIT=360 ARCHIVE=ay.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b pair_a --tune .device/pair.ron; b half_a --tune .device/half.ron
b main_b; b pair_b --tune .device/pair.ron; b half_b --tune .device/half.ron
b main_c; b pair_c --tune .device/pair.ron
if grep -q H200 $W/gpu.txt; then
    S4=$W/s4.ron; echo "Tuning(persistent_stream_inflight: Some(4))" > $S4
    b s4_a --tune $S4; b s4_b --tune $S4
    timeout 60 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
    timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1
    echo "ladder held rc=$?"; grep -E "floor|^  persistent" $W/ladder_held.log; keep
fi
