#!/bin/bash
# (Not yet run.) Lease FH: where the H200's persistent step loses to pdl. Lease FD measured on
# an H200 fused persistent 722.4-723.0 µs, tuned persistent 744.0-744.4, pdl 690.5-693.1 (the
# model: 662-669, 702-704, 707-710). `mkc bench models/llama1b_fused.ron --targets
# persistent,pdl --ablate` times each kind of work removed from both in one process, beside the
# simulator's saving. Then the GPU tests on the build whose attention check takes the model's
# score scale (lease FT failed OpenLLaMA's attention alone: the check's 1/sqrt(104) against the
# kernels' 1/sqrt(100)), then pdl's ladder on OpenLLaMA-3B (26 layers; lease FG measured pdl
# 1,935.7 µs against 1,690.5 modelled). Any card. Call with timeout ~320 (a call cut
# short by the device budget still brings back fh.tgz). Also .device/: mkc,
# gpu_test.
LIMIT=250 ARCHIVE=fh.tgz
source tools/leases/common.sh
T=models/llama1b_fused.ron TARGETS=persistent,pdl BT=140 b fused_ablate --ablate
grep -A16 "ablation (same" $W/fused_ablate.log
GT=$((LIMIT + 60 - SECONDS)) gpu_tests
grep -E "openllama|worst layer value|FAILED|off the" $W/gpu_test.log | head -12
$M model tests/configs/openllama-3b -o $W/ol.ron || exit 1
T=$W/ol.ron TARGETS=pdl BT=150 b ol_ablate --ablate --no-check
grep -A10 "ablation (same" $W/ol_ablate.log
