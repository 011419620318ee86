#!/bin/bash
# Lease FA2: lease FA's fused half again after its first run (one H100, 2026-12-07) refused
# every fused bench before launch ("its graph is not of this model": the plan check counted five
# operators a layer; fused layers have four). Fused checked against the CPU reference (P32/D128
# and a 2-layer model at a 300-token prompt), beside the tuned file (persistent, pdl),
# alternated; the bar's form (fused_pdl: persistent fused and pdl unfused in one process);
# N = 2 and 8; a traced fused step; then the GPU tests (lease FT's) until END s (560 unless set).
# Predicted as lease FA. Any card. ~9 min: call with timeout ~575. Also .device/: mkc, gpu_test.
LIMIT=230 ARCHIVE=fa2.tgz
source tools/leases/common.sh
F=models/llama1b_fused.ron
sed 's/layers: 16/layers: 2/; s/max_seq_len: 2048/max_seq_len: 512/' $F > $W/fused2.ron
sed 's/attention_in_o_proj: Some(4)/attention_in_o_proj: Some(2)/' $F > $W/fused_r2.ron
sed 's/attention_in_o_proj: Some(4)/attention_in_o_proj: Some(8)/' $F > $W/fused_r8.ron
TARGETS=persistent,pdl T=$F b fused_pdl_a
T=$W/fused2.ron b long --prompt-len 300 --tokens 8
TARGETS=persistent,pdl b main_a
TARGETS=persistent,pdl T=$F b fused_pdl_b
T=$W/fused_r2.ron b fused_r2
T=$W/fused_r8.ron b fused_r8
T=$F traced fused
GT=$((${END:-560} - SECONDS)) gpu_tests
grep -E "worst layer value|FAILED|panicked|off the" $W/gpu_test.log | head -12
