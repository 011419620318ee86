#!/bin/bash
# (Not yet run.) Lease FB: checkpoint geometries the kernels took for the first time in the
# forty-fifth session, on random weights: Llama-2-13B (32 KiB pages, 5 consumer warps, pages
# holding 2 of the 3 rows that fit) and CodeLlama-34B (32 KiB pages, 4 warps), as `mkc model`
# lowers their config.json. Two layers of 13B on every target, checked against the CPU
# reference at three positions and across targets; then all 40 layers, and 34B's 48, timed
# only (`--no-check`: the CPU reference of the whole model would outlast the call).
# Predicted (docs/perf.md, forty-fifth session), persistent / pdl / graph µs: 13B two layers,
# h100 profile at 3,160 GB/s: 576.9 / 529.3 / 558.0; 13B, h100: 9,323.6 / 8,519.7 / 9,112.4,
# h200 at 4,500: 6,877.8 / 6,034.3 / 6,685.0; 34B, h100: 23,390.2 / 21,937.4 / 22,573.2,
# h200: 16,674.0 / 15,469.5 / 16,194.2. Any card (34B's 68 GB of weights fit an H100's 80).
# ~7 min: call with timeout ~570. Also .device/: mkc.
LIMIT=470 ARCHIVE=fb.tgz
source tools/leases/common.sh
mkdir -p $W/l13 $W/cl34
cat > $W/l13/config.json <<'JSON'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 13824,
 "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
 "vocab_size": 32000, "tie_word_embeddings": false, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-5, "max_position_embeddings": 4096}
JSON
cat > $W/cl34/config.json <<'JSON'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 22016,
 "num_hidden_layers": 48, "num_attention_heads": 64, "num_key_value_heads": 8,
 "vocab_size": 32000, "tie_word_embeddings": false, "rope_theta": 1000000.0,
 "rms_norm_eps": 1e-5, "max_position_embeddings": 16384}
JSON
$M model $W/l13 -o $W/l13.ron && $M model $W/cl34 -o $W/cl34.ron || exit 1
sed 's/layers: 40/layers: 2/' $W/l13.ron > $W/l13_2.ron
export TARGETS=persistent,pdl,graph
T=$W/l13_2.ron b l13_two
T=$W/l13_2.ron b l13_two_b
T=$W/l13.ron BT=150 b l13 --no-check
T=$W/cl34.ron BT=200 b cl34 --no-check
