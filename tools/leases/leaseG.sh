#!/bin/bash
# (Run 2026-12-06 on an H100, docs/perf.md "Lease G"; the variant scripts it names are in commit da187a1.)
# Lease G: the release beside the next poll (tools/variants/late_release.py) and several
# pollers per wait (tools/variants/poll_many.py P STAGGER), interleaved with main
# (`mkc bench models/llama1b_tuned.ron --targets persistent --trials 2`), then the transformers
# check of a Llama-2-shaped f16 checkpoint whose MLP mkc zero-pads (tools/hf_check.py --model
# llama2). Starts no bench after 480 s, so that the archive comes back within the call.
# Variants (built here by the scripts, carried in .device/):
#   python3 tools/variants/late_release.py > .device/v_late_release.cu
#   python3 tools/variants/poll_many.py 4 300 > .device/v_poll4.cu
#   python3 tools/variants/poll_many.py 7 200 > .device/v_poll7.cu
#   (each with a .device/NAME.ron: Tuning(kernels_cu: Some(".device/v_NAME.cu")))
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
b() {
    local n=$1; shift
    [ $SECONDS -gt 480 ] && { echo "$n skipped (time)"; return; }
    timeout 80 $M bench $T --targets persistent --trials 2 "$@" > $W/$n.log 2>&1; echo "$n rc=$? t=$SECONDS"
    grep -E "floor|^  persistent|FAIL" $W/$n.log | sed 's/.*read bandwidth/bw/'
}
b main1
b late1 --tune .device/late_release.ron
b poll4a --tune .device/poll4.ron
b main2
if [ $SECONDS -lt 380 ]; then
    timeout 170 python3 tools/hf_check.py $M /tmp/hf2 --model llama2 persistent pdl > $W/hf_llama2.log 2>&1
    echo "hf llama2 rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|note" $W/hf_llama2.log | tail -6
fi
b late2 --tune .device/late_release.ron
b poll4b --tune .device/poll4.ron
b poll7 --tune .device/poll7.ron
b main3
tar czf $OUT/g.tgz -C $W .
