#!/bin/bash
# Lease A: GPU tests, page-loop probe, latency probe, ncu stall profile.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
( time timeout 200 .device/gpu_test --test-threads 1 ) > $OUT/gpu_test.log 2>&1; echo "gpu_test rc=$?"; tail -4 $OUT/gpu_test.log
timeout 60 $M probe pages --model $T > $OUT/pages_tuned.log 2>&1; echo "pages tuned rc=$?"
timeout 60 $M probe pages --model llama3b > $OUT/pages_3b.log 2>&1; echo "pages 3b rc=$?"
timeout 90 $M probe latency > $OUT/latency.log 2>&1; echo "latency rc=$?"
NCU="ncu --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source yes"
timeout 150 $NCU --kernel-name k_persistent --launch-skip 40 --launch-count 1 -o $OUT/pers \
  $M run $T --target persistent --tokens 48 --no-check --watchdog 120 > $OUT/ncu_pers.log 2>&1; echo "ncu pers rc=$?"
timeout 150 $NCU --kernel-name regex:"k_(qkv_rope|o_proj|up_gate|down)" --launch-skip 2600 --launch-count 4 -o $OUT/chain \
  $M run $T --target pdl --tokens 48 --no-check --watchdog 120 > $OUT/ncu_chain.log 2>&1; echo "ncu chain rc=$?"
for r in pers chain; do
  if [ -f $OUT/$r.ncu-rep ]; then
    ncu -i $OUT/$r.ncu-rep --page source --csv --print-source sass > $OUT/${r}_src.csv 2>$OUT/${r}_src.err
    ncu -i $OUT/$r.ncu-rep --page details --csv > $OUT/${r}_details.csv 2>&1
    python3 tools/ncu_stalls.py $OUT/${r}_src.csv > $OUT/${r}_stalls.txt 2>&1; echo "$r summary rc=$?"
  fi
done
echo "=== pages tuned"; tail -30 $OUT/pages_tuned.log
echo "=== pages 3b"; tail -14 $OUT/pages_3b.log
echo "=== latency"; tail -30 $OUT/latency.log
echo "=== pers stalls"; head -60 $OUT/pers_stalls.txt 2>/dev/null
tail -5 $OUT/ncu_pers.log
