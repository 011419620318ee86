#!/bin/bash
# (Not yet run.) Lease FK: the boundary window's depth on an H200, knobs only. One copy per SM
# streams 59% of an H200 and 77% of an H100 (probe latency): branch window-depth's model charges
# the hold that share of the stream in the window and says K = 2 gains 24 µs on the fused file
# on an H200 (K=1 695.5, K=2 671.7, C=4 699.2, K=2+C=4 680.2 µs at 4,560 GB/s); main's model
# says K changes nothing there (668.3 for all four). Older leases measured K = 2 +2 to +18 µs
# (AF on an H200, L, M and AV on H100s). `mkc bench models/llama1b_fused.ron --targets
# persistent --trials 2 --tune F`, each variant twice, alternated, pdl beside main once a round.
# Any card (the predictions are for an H200). Call with timeout ~260. Also .device/: mkc.
LIMIT=${LIMIT:-230} ARCHIVE=fk.tgz
source tools/leases/common.sh
T=models/llama1b_fused.ron
printf 'Tuning(persistent_boundary_inflight: Some(2))\n' > $W/k2.ron
printf 'Tuning(persistent_stream_inflight: Some(4))\n' > $W/c4.ron
printf 'Tuning(persistent_boundary_inflight: Some(2), persistent_stream_inflight: Some(4))\n' > $W/k2c4.ron
for r in a b; do
    TARGETS=persistent,pdl b main_$r
    b k2_$r --tune $W/k2.ron
    b c4_$r --tune $W/c4.ron
    b k2c4_$r --tune $W/k2c4.ron
done
echo "== lease FK: fused persistent by window depth K and stream cap C (µs, [model])"
grep -H -E "^  (persistent|pdl) " $W/main_?.log $W/k2_?.log $W/c4_?.log $W/k2c4_?.log | sed 's|/tmp/w/||'
