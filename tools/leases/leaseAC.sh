#!/bin/bash
# (Run 2026-12-06 on an H100: the H100 branch.) Lease AC: main on the H200, where the thirtieth session measured only 6af8708
# (lease Y: persistent 803.0, pdl 730.8). Main twice (with pdl), the boundary limit at K = 1
# and 2 against the H200's unlimited default (the copies it holds back changed this
# session), traces at K = 16 and 1 with `tools/sm_speeds.py`, and main's ablation ladder. On
# an H100: main twice and the ladder only. Files: .device/gpu_test, .device/biK.ron (Tuning(
# persistent_boundary_inflight: Some(K))), K = 1, 2.
LIMIT=330 ARCHIVE=ac.tgz
source tools/leases/common.sh
# First the GPU tests: the operator test's weight-store check (Runner::check_weight_store) was
# written after the thirtieth session's last lease and has not run on a GPU.
gpu_tests
if ! grep -q H200 $W/gpu.txt; then
    TARGETS=persistent,pdl b main_a; b main_b
    timeout 200 $M bench $T --targets persistent,pdl --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -22 $W/ablate.log; keep
    exit 0
fi
TARGETS=persistent,pdl b main_a; b k1a --tune .device/bi1.ron; b k2a --tune .device/bi2.ron
TARGETS=persistent,pdl b main_b; b k1b --tune .device/bi1.ron; b k2b --tune .device/bi2.ron
for k in 16 1; do
    tune=""; [ $k = 1 ] && tune="--tune .device/bi1.ron"
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace$k.json $tune > $W/trace$k.log 2>&1
    echo "trace K=$k rc=$?"; grep -A10 'us per SM' $W/trace$k.log | head -11
    for kind in lm_head up_gate; do python3 tools/sm_speeds.py $W/trace$k.json $kind; done; keep
done
[ $SECONDS -lt 330 ] && { timeout 240 $M bench $T --targets persistent,pdl --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -22 $W/ablate.log; keep; }
