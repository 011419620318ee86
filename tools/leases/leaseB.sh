#!/bin/bash
# Lease B: one page loop for every persistent matvec (unified) and two accumulator chains (acc2)
# against main, interleaved; `mkc bench models/llama1b_tuned.ron`.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
run() { # name, extra args
  local n=$1; shift
  timeout 110 $M bench $T --trials 2 "$@" > $OUT/$n.log 2>&1; echo "$n rc=$?"
  tail -7 $OUT/$n.log
}
run main1 --targets persistent,pdl
run unified1 --targets persistent --tune .device/unified.ron
run fence1 --targets persistent --tune .device/fence_each.ron
run acc2 --targets persistent,pdl --tune .device/acc2.ron
run main2 --targets persistent,pdl
run unified2 --targets persistent --tune .device/unified.ron
run fence2 --targets persistent --tune .device/fence_each.ron
