#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BF"; its variant is now in the commit tools/variants/README names.) Lease BF (any card): the run's workload now sizes the persistent layout and the
# prediction (`--prompt-len`/`--tokens` feed `workload`), and the model charges attention's KV
# chunks past the first. At a 1,024-token prompt the persistent kernel gets 7 ring slots and
# 388-position chunks (was 11 and 132): against 11 slots (lease BE's layout) and pdl. At the
# workload's own P32/D128, 10 slots (the whole history in one chunk) against 11. Then
# tools/variants/kv_double_buffer.py (attention's further KV chunks double-buffered) at both
# contexts, checked by the bench's CPU reference (position 158 of P32/D128 is a second chunk in
# the persistent layout; every step of P1024 has three). docs/perf.md "The run's workload sizes
# the persistent layout (lease BF, predicted)" and "Attention's further KV chunks
# double-buffered (predicted)". Files (.device/): mkc, s10.ron (`Tuning(persistent_slots:
# Some(10))`), s11.ron (the same with 11), v_kvdb.cu (`python3
# tools/variants/kv_double_buffer.py > .device/v_kvdb.cu`) and kvdb.ron (`Tuning(kernels_cu:
# Some(".device/v_kvdb.cu"))`); on an H200 also s4.ron (`Tuning(persistent_stream_inflight:
# Some(4))`), v_early_close.cu (`python3 tools/variants/early_close.py`) with ec.ron and
# v_long_wait4.cu (`python3 tools/variants/long_wait.py 4`) with lw4.ron.
LIMIT=420 ARCHIVE=bf.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
long() {  # NAME [ARGS]: the 1,024-token run; the CPU reference replays 1,088 positions
    local n=$1; shift
    [ $SECONDS -gt $LIMIT ] && { echo "$n skipped (time)"; return; }
    timeout 240 $M bench $T --targets persistent,pdl --trials 2 --prompt-len 1024 --tokens 64 "$@" > $W/$n.log 2>&1; echo "$n rc=$? t=$SECONDS"
    grep -E "floor|^  persistent|^  pdl|FAIL|rror|stall|growth" $W/$n.log; keep
}
b main_a
# On an H200 (the bar's card; none since lease AF), first: the held ladder with the weights rung, the
# stream cap 4 (the h200 profile sets none), the variants that wait for it (early_close.py,
# long_wait.py 4) and `mkc probe latency` (files: s4.ron, v_early_close.cu and ec.ron,
# v_long_wait4.cu and lw4.ron, made as for kvdb.ron).
if grep -q H200 $W/gpu.txt; then
    timeout 150 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_h200.log 2>&1; echo "ladder rc=$?"; grep -E "^  persistent|growth" $W/ladder_h200.log; keep
    b s4_h200 --tune .device/s4.ron
    b ec_h200 --tune .device/ec.ron
    b lw4_h200 --tune .device/lw4.ron
    b main_h200
    timeout 60 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -6 $W/latency.log; keep
fi
b s10_a --tune .device/s10.ron
b kvdb_a --tune .device/kvdb.ron
long long_main
long long_kvdb --tune .device/kvdb.ron
timeout 120 $M bench $T --targets persistent --trials 2 --prompt-len 1024 --tokens 64 --no-check --tune .device/s11.ron > $W/long_s11.log 2>&1; echo "long_s11 rc=$? t=$SECONDS"; grep -E "^  persistent|growth" $W/long_s11.log; keep
b main_b
b s10_b --tune .device/s10.ron
b kvdb_b --tune .device/kvdb.ron
grep -h growth $W/main_a.log $W/s10_a.log $W/kvdb_a.log $W/main_b.log $W/s10_b.log $W/kvdb_b.log 2>/dev/null
