#!/bin/bash
# (Not yet run.) Lease FG: the build of 7646cf9 (every kernel reads RoPE's frequencies from the
# generated table and attention's scale as a generated constant: every kernel's machine code
# changed; attention 64 -> 58 registers) against 41e5fcd's (.device/mkc_prev), tuned file,
# persistent and pdl, alternated twice: predicted equal within noise (one rsqrt and one
# exp2f per row moved to data). Then OpenLLaMA-3B's heads of 100 zero-padded to 104
# (`checkpoint_head_dim`) for the first time: the transformers oracle on four of its layers
# (tools/hf_check.py --model openllama, persistent and pdl), and all 26 layers of its shape on
# random weights, checked against the CPU reference at three positions (persistent, pdl, graph).
# Predicted (h100 profile at 3,160 GB/s, `mkc simulate`): see docs/perf.md. Any card.
# ~6 min: call with timeout ~450. Also .device/: mkc, mkc_prev.
LIMIT=380 ARCHIVE=fg.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a
M=.device/mkc_prev b prev_a
b main_b
M=.device/mkc_prev b prev_b
timeout 170 python3 tools/hf_check.py $M /tmp/hf_openllama --model openllama persistent pdl > $W/hf_openllama.log 2>&1
echo "hf openllama rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_openllama.log | tail -4; keep
$M model tests/configs/openllama-3b -o $W/ol.ron || exit 1
TARGETS=persistent,pdl,graph T=$W/ol.ron BT=150 b openllama
