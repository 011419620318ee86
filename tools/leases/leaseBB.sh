#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease BB".) Lease BB (any card): the tensor-core page loop of the staged operators as
# main's code (docs/perf.md "The tensor-core page loop as main's code"): the GPU tests (the page
# probe's new tensor-core rows against the CPU among them), `mkc probe pages`, main against the
# previous kernels (.device/v_old.cu: `git show bfdf8c5:backend/kernels/mkc.cu`, with
# old.ron naming it as kernels_cu) in alternating processes, the transformers check of both
# targets, and main's held ablation ladder. Files (.device/): mkc, gpu_test, v_old.cu, old.ron.
LIMIT=420 ARCHIVE=bb.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
gpu_tests
timeout 40 $M probe pages --model $T > $W/pages.log 2>&1; echo "pages rc=$?"; grep -E "tensor cores|rel L2|^  +1 +1" $W/pages.log | head -8; keep
b main_a; b old_a --tune .device/old.ron
b main_b; b old_b --tune .device/old.ron
timeout 200 python3 tools/hf_check.py $M /tmp/hf1 persistent pdl > $W/hf_llama1b.log 2>&1; echo "hf llama1b rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_llama1b.log | tail -6; keep
[ $SECONDS -lt $LIMIT ] && { timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder_held.log 2>&1; echo "ladder rc=$?"; grep -E "^  persistent" $W/ladder_held.log; keep; }
