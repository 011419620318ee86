#!/bin/bash
# Lease GC (forty-ninth session): the persistent producer warming L2 while its ring is full and
# landed and its consumers compute (tuning.persistent_warm_pages D), on the fused file: main
# (persistent with pdl beside) and D = 8 alternated twice, the GPU test of every layer's values
# (the warming build among them), D = 4 and 16 once, every bench checked; then, where an H200
# holds it and time is left, lease FL's 80 layers of Llama-3-70B (unchecked). Predictions:
# docs/perf.md ("Lease GC"). Call with timeout ~420, carry .device (mkc and gpu_test).
LIMIT=${LIMIT:-150} ARCHIVE=gc.tgz
source tools/leases/common.sh
T=models/llama1b_fused.ron
for d in 4 8 16; do printf "Tuning(persistent_warm_pages: Some($d))\n" > $W/w$d.ron; done
TARGETS=persistent,pdl b main_a; b w8_a --tune $W/w8.ron
TARGETS=persistent,pdl b main_b; b w8_b --tune $W/w8.ron
# Every layer's values against the CPU, the warming build among them (carried gpu_test).
if [ $SECONDS -lt $LIMIT ]; then
    timeout 100 .device/gpu_test every_layers_values --test-threads 1 --nocapture > $W/layers.log 2>&1
    echo "layer values rc=$?"; grep -E "rel L2|panicked|test result" $W/layers.log; keep
fi
b w4_a --tune $W/w4.ron; b w16_a --tune $W/w16.ron
echo "== lease GC: fused persistent by warm pages D (µs, [model])"
grep -H -E "^  (persistent|pdl) " $W/main_?.log $W/w*_?.log | sed 's|/tmp/w/||'
grep -h 'read bandwidth' $W/main_?.log | head -2
if [ $SECONDS -lt 330 ] && grep -q H200 $W/gpu.txt; then
    $M model tests/configs/llama-3-70b -o $W/l70.ron > /dev/null 2>&1 &&
        LIMIT=400 BT=$((470 - SECONDS)) T=$W/l70.ron TARGETS=persistent,pdl,graph b l70 --no-check
fi
keep
