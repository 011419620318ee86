#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AL (any card): main against `tools/variants/lsu_window.py window` (pages issued in a
# boundary window copied by the producer warp's 16-byte cp.async, no hold) and `always` (every
# page so), alternating processes, persistent and pdl (pdl: main's chain in both builds, the
# control); traced steps of main and `window` (layer 8's table). On an H200, `mkc probe
# latency` last. Files: .device/v_lsu_window.cu, .device/v_lsu_always.cu, .device/lsu_window.ron,
# .device/lsu_always.ron (`Tuning(kernels_cu: Some(".device/v_lsu_MODE.cu"))`).
LIMIT=420 ARCHIVE=al.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b window_a --tune .device/lsu_window.ron; b always_a --tune .device/lsu_always.ron
b main_b; b window_b --tune .device/lsu_window.ron; b always_b --tune .device/lsu_always.ron
for n in main window; do
    [ $SECONDS -gt 470 ] && break
    tune=""; [ $n = window ] && tune="--tune .device/lsu_window.ron"
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace_$n.json $tune > $W/trace_$n.log 2>&1
    echo "trace $n rc=$?"; grep "traced step" $W/trace_$n.log | sed 's/.*traced step/traced step/'
    python3 tools/layer_table.py $W/trace_$n.json 8; keep
done
if grep -q H200 $W/gpu.txt && [ $SECONDS -lt 480 ]; then
    timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -12 $W/latency.log; keep
fi
