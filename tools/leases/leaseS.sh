#!/bin/bash
# (Not yet run.)
# Lease S: the persistent ablation ladder at the H100's default hold (K = 1) and unheld
# (K = 16) on one card, to split the stream-alone excess over the floor into the hold's share
# and the rest. docs/perf.md "The stream alone, held and unheld".
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 1, 16)
LIMIT=300 ARCHIVE=s.tgz
source tools/leases/common.sh
for k in 16 1; do
    timeout 150 $M bench $T --targets persistent --trials 1 --ablate --tune .device/bi$k.ron > $W/ablate_k$k.log 2>&1; echo "ablate K=$k rc=$? t=$SECONDS"; grep -E "floor|^  persistent" $W/ablate_k$k.log | sed 's/.*read bandwidth/bw/'; keep
done
