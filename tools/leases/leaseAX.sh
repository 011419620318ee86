#!/bin/bash
# (Called 2026-12-06: the call got an H100 and ran nothing; docs/perf.md "Lease AX".) Lease AX (an H200 only; on any other card it runs nothing): lease AU's H200
# branch in the device time one call has left (docs/perf.md "What the share cap stands for",
# predicted there): main (K = 1, no cap) against the stream cap 4, `mkc probe latency` (its
# one-copy L2 hit is the h200 profile's missing `load_latency_held_ns`), the held ladder.
# Files: .device/mkc.
LIMIT=170 ARCHIVE=ax.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
S4=$W/s4.ron; echo "Tuning(persistent_stream_inflight: Some(4))" > $S4
export TARGETS=persistent,pdl
b main_a; b s4_a --tune $S4
timeout 60 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1
echo "ladder held rc=$?"; grep -E "floor|^  persistent" $W/ladder_held.log; keep
b main_b; b s4_b --tune $S4
