#!/bin/bash
# (Run 2026-12-06 on an H100 after two calls got no machine: docs/perf.md "Lease AT".) Lease AT (any card): the producer's cap outside the boundary window as main's knob
# (`tuning.persistent_stream_inflight`, the h100 profile's 4). On an H200 (whose profile sets
# no cap): main against caps 4 and 2, then lease AG's variants (`early_close.py`,
# `long_wait.py 4`), and `mkc probe latency`. On an H100 (main caps at 4):
# main against the unlimited stream (16), then the same variants. The GPU tests last (the
# producer's gate is new). Files (.device/): mkc, gpu_test; s2.ron, s4.ron, s16.ron
# (`Tuning(persistent_stream_inflight: Some(N))`); v_early_close.cu and ec1.ron, v_long_wait4.cu
# and lw4.ron (as leaseAG.sh).
LIMIT=230 ARCHIVE=at.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
if grep -q H200 $W/gpu.txt; then
    b main_a; b s4_a --tune .device/s4.ron; b s2_a --tune .device/s2.ron
    b main_b; b s4_b --tune .device/s4.ron; b ec_b --tune .device/ec1.ron; b lw4_b --tune .device/lw4.ron
    [ $SECONDS -lt 260 ] && { timeout 80 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -14 $W/latency.log; keep; }
else
    b main_a; b s16_a --tune .device/s16.ron; b main_b; b s16_b --tune .device/s16.ron
    b ec_c --tune .device/ec1.ron; b lw4_c --tune .device/lw4.ron
fi
[ $SECONDS -lt 270 ] && gpu_tests
