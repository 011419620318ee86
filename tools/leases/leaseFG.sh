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
mkdir -p $W/ol
cat > $W/ol/config.json <<'JSON'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 3200, "intermediate_size": 8640,
 "num_hidden_layers": 26, "num_attention_heads": 32, "num_key_value_heads": 32,
 "vocab_size": 32000, "tie_word_embeddings": false, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-6, "max_position_embeddings": 2048}
JSON
$M model $W/ol -o $W/ol.ron || exit 1
TARGETS=persistent,pdl,graph T=$W/ol.ron BT=150 b openllama
