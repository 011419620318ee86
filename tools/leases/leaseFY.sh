#!/bin/bash
# (Not yet run.) Lease FY, for what is left of a session's device budget: the transformers
# oracle on YaRN RoPE scaling (tools/hf_check.py --model yarn: four TinyLlama layers, factor 4
# over 2,048 positions; predicted PASSED on persistent and pdl), then the GPU tests on the build
# whose attention checks take the model's score scale (predicted 5 of 5, OpenLLaMA's attention
# alone included). Any card. Logs into $OUT/fy.tgz after each step. Also .device/: mkc,
# gpu_test.
LIMIT=400 ARCHIVE=fy.tgz
source tools/leases/common.sh
timeout 120 python3 tools/hf_check.py $M /tmp/hf_yarn --model yarn persistent pdl > $W/hf_yarn.log 2>&1
echo "hf yarn rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_yarn.log | tail -4; keep
GT=240 gpu_tests
grep -E "openllama|FAILED|off the" $W/gpu_test.log | head -12
