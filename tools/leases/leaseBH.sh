#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BH".) Lease BH (any card): split-KV attention (`lowering.attention_kv_split`) on the
# GPU for the first time. The GPU tests (the operator checks now run the tuned layout with 3 KV
# parts: attention's partial records against the CPU, the O-projection merging random ones),
# then the bench's CPU reference check and timings at P32/D128 (1 and 2 parts) and at a
# 1,024-token prompt (1, 2 and 4 parts), persistent and pdl side by side. docs/perf.md "Split-KV
# attention (lease BH, predicted)". Files (.device/): mkc, gpu_test (`cargo test --release -p
# mkc-backend --test gpu --no-run`'s binary), kv2.ron and kv4.ron (models/llama1b_tuned.ron
# with `attention_kv_split: 2` / `4` under `lowering`).
LIMIT=420 ARCHIVE=bh.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
gpu_tests
long() {  # NAME MODEL [ARGS]: the 1,024-token run; the CPU reference replays 1,088 positions
    local n=$1 model=$2; shift 2
    [ $SECONDS -gt $LIMIT ] && { echo "$n skipped (time)"; return; }
    timeout 200 $M bench $model --targets persistent,pdl --trials 2 --prompt-len 1024 --tokens 64 "$@" > $W/$n.log 2>&1; echo "$n rc=$? t=$SECONDS"
    grep -E "floor|^  persistent|^  pdl|FAIL|rror|stall|growth" $W/$n.log; keep
}
long long_kv4 .device/kv4.ron
long long_main $T --no-check
T=.device/kv2.ron b kv2_a
b main_a
long long_kv2 .device/kv2.ron --no-check
T=.device/kv2.ron b kv2_b
b main_b
long long_kv4b .device/kv4.ron --no-check
