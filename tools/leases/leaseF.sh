#!/bin/bash
# Lease F: an in-flight cap on the persistent producer (tools/variants/inflight.py K) and the
# release beside the next poll (tools/variants/late_release.py), interleaved with main; `mkc bench models/llama1b_tuned.ron --targets persistent`.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
# Variants (built here by the scripts, carried in .device/):
#   for k in 3 4 6; do python3 tools/variants/inflight.py $k > .device/v_if$k.cu; done
#   python3 tools/variants/late_release.py > .device/v_late_release.cu
#   (each with a .device/NAME.ron: Tuning(kernels_cu: Some(\".device/v_NAME.cu\")))
b() { local n=$1; shift; timeout 100 $M bench $T --targets persistent --trials 2 "$@" > $W/$n.log 2>&1; echo "$n rc=$?"; grep -E "floor|^  persistent|FAIL" $W/$n.log | sed 's/.*read bandwidth/bw/'; }
b main1
b if4a --tune .device/if4.ron
b late1 --tune .device/late_release.ron
b if3 --tune .device/if3.ron
b main2
b late2 --tune .device/late_release.ron
b if6 --tune .device/if6.ron
b if4b --tune .device/if4.ron
tar czf $OUT/f.tgz -C $W .
