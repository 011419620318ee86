#!/bin/bash
# (Not yet run.) Lease AY (any card): two landed pages at once (docs/perf.md "Two landed pages
# at once"): main against tools/variants/pair_pages.py, three alternating rounds; on an H200
# then lease AX's branch (the stream cap 4, probe latency, the held ladder). Files (.device/):
# mkc, v_pair.cu (`python3 tools/variants/pair_pages.py`), pair.ron
# (`Tuning(kernels_cu: Some(".device/v_pair.cu"))`).
LIMIT=300 ARCHIVE=ay.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b pair_a --tune .device/pair.ron; b main_b; b pair_b --tune .device/pair.ron
b main_c; b pair_c --tune .device/pair.ron
if grep -q H200 $W/gpu.txt; then
    S4=$W/s4.ron; echo "Tuning(persistent_stream_inflight: Some(4))" > $S4
    b s4_a --tune $S4; b s4_b --tune $S4
    timeout 60 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
    timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1
    echo "ladder held rc=$?"; grep -E "floor|^  persistent" $W/ladder_held.log; keep
fi
