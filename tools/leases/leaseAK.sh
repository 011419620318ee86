#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AK (any card): the GPU tests on d5bb853 (setup.rs's split-K store from MatvecWork: not
# yet run on a GPU); main against `tools/variants/lm_pool.py` (the LM head's tasks claimed from
# a pool at run time, both targets), alternating processes, and a traced pooled step (its LM
# head's per-SM compute spread; main's layer table, attention's phases included); on an H200, `mkc probe latency` (the held release) last.
# Files: .device/gpu_test, .device/v_lm_pool.cu, .device/pool.ron
# (`Tuning(kernels_cu: Some(".device/v_lm_pool.cu"))`).
LIMIT=400 ARCHIVE=ak.tgz
source tools/leases/common.sh
gpu_tests
export TARGETS=persistent,pdl
b main_a; b pool_a --tune .device/pool.ron
b main_b; b pool_b --tune .device/pool.ron
for n in main pool; do
    tune=""; [ $n = pool ] && tune="--tune .device/pool.ron"
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace_$n.json $tune > $W/trace_$n.log 2>&1
    echo "trace $n rc=$?"; python3 tools/sm_speeds.py $W/trace_$n.json lm_head | sed -n '1p;4p'
    [ $n = main ] && python3 tools/layer_table.py $W/trace_$n.json 8; keep
done
if grep -q H200 $W/gpu.txt && [ $SECONDS -lt 480 ]; then
    timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -12 $W/latency.log; keep
fi
