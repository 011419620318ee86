#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AU".) Lease AU (any card): what the persistent model's share cap stands for
# (docs/perf.md "The model sees the SMs' speeds"): the ablation ladders held (main) and unheld
# (no hold, no cap), `mkc probe sm-speeds` and `mkc probe latency` (on an H200 its 1-copy L2
# hit is the h200 profile's missing `load_latency_held_ns`), main against pdl; on an H200 also
# the stream cap 4. Files: .device/mkc, .device/gpu_test (the tune files are written here). The GPU tests last.
LIMIT=300 ARCHIVE=au.tgz
source tools/leases/common.sh
U=$W/unheld.ron S4=$W/s4.ron
echo "Tuning(persistent_boundary_inflight: Some(16), persistent_stream_inflight: Some(16))" > $U
echo "Tuning(persistent_stream_inflight: Some(4))" > $S4
export TARGETS=persistent,pdl
ladder() {
    local n=$1; shift
    timeout 100 $M bench $T --targets persistent --trials 1 --ablate "$@" > $W/ladder_$n.log 2>&1
    echo "ladder $n rc=$?"; grep -E "^  persistent" $W/ladder_$n.log; keep
}
b main_a
ladder held
ladder unheld --tune $U
timeout 80 $M probe sm-speeds > $W/sm_speeds.log 2>&1; echo "sm-speeds rc=$?"; grep -iE "fast|mean|GB/s in all" $W/sm_speeds.log | head -5; keep
timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
if grep -q H200 $W/gpu.txt; then b s4_a --tune $S4; b main_b; b s4_b --tune $S4; fi
gpu_tests
