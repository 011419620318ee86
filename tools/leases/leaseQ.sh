#!/bin/bash
# (Run three times, 2026-12-06: every call landed on an H100 and ran an H100 branch; its last H100 branch measured main against ec1, whose variant has since left tools/variants.)
# Lease Q: lease P's H200 branch alone (an H100 runs main against ec1 only): main (no limit) twice, the
# release-only window at K = 1 twice, the same at the short instructions only (QKV and the
# O-projection: `release_window.py short`, .device/rs1.ron) twice, the window closed at the
# wait's end (`early_close.py`, ec1) twice, the full window at K = 9; then the H200's held release
# for the model: one traced step at K = 1 and at 16 (`finish` per instruction, as lease O on
# the H100) and `mkc probe latency` (a release after a store beside 1 and 8 copies per SM).
# Last, if time is left, the ablation ladder of main on this card (the anchors' breakdown).
# docs/perf.md "Lease Q".
# Files (.device is not versioned; build them first):
#   python3 tools/variants/release_window.py > .device/v_release_window.cu
#   python3 tools/variants/release_window.py short > .device/v_release_short.cu
#   .device/rw1.ron: Tuning(persistent_boundary_inflight: Some(1), kernels_cu: Some(".device/v_release_window.cu"))
#   .device/rs1.ron: Tuning(persistent_boundary_inflight: Some(1), kernels_cu: Some(".device/v_release_short.cu"))
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K)), K = 1, 9, 16
#   python3 tools/variants/early_close.py > .device/v_early_close.cu
#   .device/ec1.ron: Tuning(persistent_boundary_inflight: Some(1), kernels_cu: Some(".device/v_early_close.cu"))
LIMIT=340 ARCHIVE=q.tgz
source tools/leases/common.sh
if ! grep -q H200 $W/gpu.txt; then
    # An H100 (its ladder ran in lease Q's first call and lease S, rs1 in its second): main
    # against the window closed at the wait's end (ec1), twice each.
    b main_a; b ec1a --tune .device/ec1.ron; b main_b; b ec1b --tune .device/ec1.ron
    exit 0
fi
TARGETS=persistent,pdl b main_a; b rw1a --tune .device/rw1.ron; b rs1a --tune .device/rs1.ron; b ec1a --tune .device/ec1.ron; b k9 --tune .device/bi9.ron
b main_b; b rw1b --tune .device/rw1.ron; b rs1b --tune .device/rs1.ron; b ec1b --tune .device/ec1.ron
for k in 1 16; do
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace$k.json --tune .device/bi$k.ron > $W/trace$k.log 2>&1
    echo "trace K=$k rc=$?"; grep -A10 'us per SM' $W/trace$k.log | head -11
    for kind in lm_head up_gate; do python3 tools/sm_speeds.py $W/trace$k.json $kind; done; keep
done
timeout 120 $M probe latency > $W/probe_latency.log 2>&1; echo "probe rc=$?"; tail -25 $W/probe_latency.log; keep
[ $SECONDS -lt 330 ] && { timeout 240 $M bench $T --targets persistent,pdl --trials 2 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -22 $W/ablate.log; keep; }
