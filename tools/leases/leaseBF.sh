#!/bin/bash
# (Not yet run.) Lease BF (any card): the run's workload now sizes the persistent layout and the
# prediction (`--prompt-len`/`--tokens` feed `workload`), and the model charges attention's KV
# chunks past the first. At a 1,024-token prompt the persistent kernel gets 7 ring slots and
# 388-position chunks (was 11 and 132): against 11 slots (lease BE's layout) and pdl. At the
# workload's own P32/D128, 10 slots (the whole history in one chunk) against 11. docs/perf.md
# "The run's workload sizes the persistent layout (lease BF, predicted)". Files (.device/):
# mkc, s10.ron (`Tuning(persistent_slots: Some(10))`), s11.ron (the same with 11).
LIMIT=170 ARCHIVE=bf.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a
b s10_a --tune .device/s10.ron
# The CPU reference replays 1,088 positions: a longer limit than b's.
timeout 240 $M bench $T --targets persistent,pdl --trials 2 --prompt-len 1024 --tokens 64 > $W/long.log 2>&1; echo "long rc=$? t=$SECONDS"; grep -E "floor|^  persistent|^  pdl|FAIL|rror|stall|growth" $W/long.log; keep
timeout 120 $M bench $T --targets persistent --trials 2 --prompt-len 1024 --tokens 64 --no-check --tune .device/s11.ron > $W/long_s11.log 2>&1; echo "long_s11 rc=$? t=$SECONDS"; grep -E "^  persistent|growth" $W/long_s11.log; keep
b main_b
b s10_b --tune .device/s10.ron
grep -h growth $W/main_a.log $W/s10_a.log $W/main_b.log $W/s10_b.log 2>/dev/null
