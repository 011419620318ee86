#!/bin/bash
# Lease D: four held-out layouts (the simulator's predictions printed beside each).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for n in tp2 as2 ao2 ao4; do
  timeout 130 $M bench .device/ho_$n.ron --targets persistent,pdl --trials 1 > $OUT/ho_$n.log 2>&1; echo "$n rc=$?"
  tail -6 $OUT/ho_$n.log
done
