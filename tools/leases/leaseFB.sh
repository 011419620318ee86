#!/bin/bash
# (Not yet run.) Lease FB: checkpoint geometries the kernels took for the first time in the
# forty-fifth session, on random weights, as `mkc model` lowers their config.json: SmolLM-135M
# (rows of 576 columns: 3 lane rounds, the last partial) and -360M (960), all layers, checked
# against the CPU reference at three positions and across targets; Llama-2-13B (32 KiB pages,
# 6 consumer warps, the MLP in 8 shards, pages holding 2 of the 3 rows that fit), two layers
# checked, then all 40 and CodeLlama-34B's 48 (32 KiB pages, 4 warps) timed only
# (`--no-check`: the CPU reference of the whole model would outlast the call).
# Predicted (docs/perf.md, forty-fifth session), persistent / pdl / graph µs, h100 profile at
# 3,160 GB/s: SmolLM-135M 573.0 / 362.3 / 701.6; -360M 631.7 / 565.3 / 897.4; 13B two layers
# 574.9 / 537.6 / 566.6; 13B 9,283.3 / 8,687.2 / 9,284.7; 34B 23,434.2 / 22,025.7 /
# 22,661.5. h200 at 4,500: SmolLM-135M 689.3 / 432.9 / 790.9; -360M 749.4 / 609.8 / 948.2;
# 13B 6,830.0 / 6,134.9 / 6,805.9; 34B 16,705.1 / 15,531.5 / 16,256.2. Any card (34B's 68 GB
# of weights fit an H100's 80). ~8 min: call with timeout ~570. Also .device/: mkc.
LIMIT=470 ARCHIVE=fb.tgz
source tools/leases/common.sh
mkdir -p $W/l13 $W/cl34 $W/smol $W/smol360
cat > $W/smol/config.json <<'JSON'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 576, "intermediate_size": 1536,
 "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
 "vocab_size": 49152, "tie_word_embeddings": true, "rope_theta": 10000.0,
 "rms_norm_eps": 1e-5, "max_position_embeddings": 2048}
JSON
cat > $W/smol360/config.json <<'JSON'
{"model_type": "llama", "hidden_act": "silu", "hidden_size": 960, "intermediate_size": 2560,
 "num_hidden_layers": 32, "num_attention_heads": 15, "num_key_value_heads": 5,
 "vocab_size": 49152, "tie_word_embeddings": true, "rope_theta": 100000.0,
 "rms_norm_eps": 1e-5, "max_position_embeddings": 8192}
JSON
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
for c in l13 cl34 smol smol360; do $M model $W/$c -o $W/$c.ron || exit 1; done
sed 's/layers: 40/layers: 2/' $W/l13.ron > $W/l13_2.ron
export TARGETS=persistent,pdl,graph
T=$W/smol.ron b smol
T=$W/smol360.ron b smol360
T=$W/l13_2.ron b l13_two
T=$W/l13_2.ron b l13_two_b
T=$W/l13.ron BT=150 b l13 --no-check
T=$W/cl34.ron BT=200 b cl34 --no-check
