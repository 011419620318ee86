#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AP (any card): the GPU tests on the build with the end-barrier mark (Mark::Ended);
# main with pdl, and a traced main step whose layer tables (4, 8, 12) show each operator's
# release from the new mark. On an H200, also `mkc probe latency` (the h200 profile's held
# release) and `tools/variants/early_close.py` / `long_wait.py 4` once each (lease AG's items).
# Files: .device/gpu_test, and for an H200 .device/ec1.ron, .device/lw4.ron with their .cu.
LIMIT=300 ARCHIVE=ap.tgz
source tools/leases/common.sh
gpu_tests
TARGETS=persistent,pdl b main
timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace.json > $W/trace.log 2>&1
echo "trace rc=$?"; grep "traced step" $W/trace.log | sed 's/.*traced step/traced step/'
for l in 4 8 12; do python3 tools/layer_table.py $W/trace.json $l; done; keep
if grep -q H200 $W/gpu.txt; then
    timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -12 $W/latency.log; keep
    export TARGETS=persistent,pdl; b ec --tune .device/ec1.ron; b lw4 --tune .device/lw4.ron; b main2
fi
