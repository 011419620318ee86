#!/bin/bash
# Lease C: the ablation ladder with the clean compute rung, then transformers checks of
# TinyLlama's and a small Mistral's shapes from their checkpoint directories.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 330 $M bench $T --targets persistent,pdl --trials 2 --ablate > $OUT/ablate.log 2>&1; echo "ablate rc=$?"
timeout 100 python3 tools/hf_check.py $M /tmp/hf_tiny --model tinyllama persistent pdl > $OUT/hf_tiny.log 2>&1; echo "hf tinyllama rc=$?"
timeout 80 python3 tools/hf_check.py $M /tmp/hf_mis --model mistral persistent pdl > $OUT/hf_mistral.log 2>&1; echo "hf mistral rc=$?"
tail -25 $OUT/ablate.log; tail -8 $OUT/hf_tiny.log; tail -8 $OUT/hf_mistral.log
