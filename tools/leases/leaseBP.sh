#!/bin/bash
# (Run 2026-12-07 on an H100: the ladder; docs/perf.md "Lease BN".) Lease BP, for a call with
# little device time left. On an H200: issue 18's bar
# (main, persistent and pdl in one process, three rounds), `mkc probe latency` (the one-copy
# L2 hit the h200 profile lacks) and split-KV's merge in one round trip at 2 parts
# (`tools/variants/merge_batch.py`; .device/mb.ron + v_mb.cu, kv2.ron). On another card: the
# held ladder (`--ablate`), against the model's rungs as the forty-second session recalibrated
# them (docs/perf.md "The page loop's own pass"). Also .device/: mkc.
LIMIT=240 ARCHIVE=bp.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
if ! grep -q H200 $W/gpu.txt; then
    timeout 150 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder.log 2>&1; echo "ladder rc=$? t=$SECONDS"
    grep -E "floor|^  persistent" $W/ladder.log; keep
    exit
fi
b main_a
b main_b
probe_latency
T=.device/kv2.ron b kv2_a
T=.device/kv2.ron b kv2mb_a --tune .device/mb.ron
b main_c
