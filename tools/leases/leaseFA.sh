#!/bin/bash
# (Not yet run.) Lease FA: attention inside the O-projection (`models/llama1b_fused.ron`,
# `lowering.attention_in_o_proj`) on a GPU for the first time, and main's new build against the
# last measured one. Correctness first: every bench checks its logits against the CPU reference
# at three positions (P32/D128); `long` runs a 2-layer fused model at a 300-token prompt, whose
# history passes the persistent attention's first KV chunk. Then the fused file (persistent;
# `fused_pdl` adds pdl, which lowers the file without the option on a runner of its own: the
# bar's form, one process) beside the tuned one (persistent and pdl), alternated twice, and
# N = 2 and 8 tasks per head once each. Since the forty-fifth session every kernel takes its
# rows per page as a generated constant (PAGE_ROWS_*), which changed all their machine code:
# `prev_a`/`prev_b` run 06e11f9's build (.device/mkc_prev) beside main's, alternated.
# Predicted (docs/perf.md, forty-fourth and forty-fifth sessions): fused 673.6 µs on the h200
# profile at 4,500 GB/s against 708.9 for the tuned file; on the h100 profile at 3,160 GB/s
# 841.4 against 876.1; N = 2: 712.7 / 874.8, N = 8: 742.0 / 916.3; main against prev: equal
# within noise. Any card (the ranking is within the lease). After the A/B, `mkc probe pages`
# on the fused file (the narrow page's ns). The GPU tests are lease FT's (they name the first
# layer value off the CPU reference if the fused kernel is wrong). ~8 min: call with timeout
# ~570. Also .device/: mkc, mkc_prev.
LIMIT=470 ARCHIVE=fa.tgz
source tools/leases/common.sh
F=models/llama1b_fused.ron
sed 's/layers: 16/layers: 2/; s/max_seq_len: 2048/max_seq_len: 512/' $F > $W/fused2.ron
sed 's/attention_in_o_proj: Some(4)/attention_in_o_proj: Some(2)/' $F > $W/fused_r2.ron
sed 's/attention_in_o_proj: Some(4)/attention_in_o_proj: Some(8)/' $F > $W/fused_r8.ron
T=$F b fused_a
T=$W/fused2.ron b long --prompt-len 300 --tokens 8
TARGETS=persistent,pdl b main_a
TARGETS=persistent,pdl M=.device/mkc_prev b prev_a
T=$F b fused_b
TARGETS=persistent,pdl b main_b
TARGETS=persistent,pdl M=.device/mkc_prev b prev_b
TARGETS=persistent,pdl T=$F b fused_pdl
timeout 60 $M probe pages --model $F > $W/probe_pages.log 2>&1; echo "probe pages rc=$?"; tail -14 $W/probe_pages.log; keep
T=$W/fused_r2.ron b fused_r2
T=$W/fused_r8.ron b fused_r8
T=$F traced fused
