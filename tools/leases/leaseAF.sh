#!/bin/bash
# (Run 2026-12-06 on an H200.) Lease AF: lease AC's H200 branch alone (main on an H200, the boundary limit at K = 1 and 2,
# traces at K = 16 and 1), which AC's H100 could not run. On an H100 it exits at once, so that
# a call that lands there costs only the machine's start.
LIMIT=330 ARCHIVE=af.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
gpu_tests
TARGETS=persistent,pdl b main_a; b k1a --tune .device/bi1.ron; b k2a --tune .device/bi2.ron
TARGETS=persistent,pdl b main_b; b k1b --tune .device/bi1.ron; b k2b --tune .device/bi2.ron
for k in 16 1; do
    tune=""; [ $k = 1 ] && tune="--tune .device/bi1.ron"
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace$k.json $tune > $W/trace$k.log 2>&1
    echo "trace K=$k rc=$?"; grep -A10 'us per SM' $W/trace$k.log | head -11
    for kind in lm_head up_gate; do python3 tools/sm_speeds.py $W/trace$k.json $kind; done; keep
done
timeout 60 $M probe sm-speeds > $W/speeds.log 2>&1; echo "sm-speeds rc=$?"; tail -3 $W/speeds.log; keep
[ $SECONDS -lt 330 ] && { timeout 240 $M bench $T --targets persistent,pdl --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -22 $W/ablate.log; keep; }
