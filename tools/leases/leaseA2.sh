#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron; W=/tmp/w; mkdir -p $W
timeout 60 $M probe pages --model $T > $W/pages_tuned.log 2>&1; echo "pages tuned rc=$?"
timeout 60 $M probe pages --model .device/acc2_tuned.ron > $W/pages_acc2.log 2>&1; echo "pages acc2 rc=$?"
timeout 60 $M probe pages --model llama3b > $W/pages_3b.log 2>&1; echo "pages 3b rc=$?"
NCU="ncu --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight --import-source yes"
timeout 150 $NCU --kernel-name k_persistent --launch-skip 40 --launch-count 1 -o $W/pers \
  $M run $T --target persistent --tokens 48 --no-check --watchdog 120 > $W/ncu_pers.log 2>&1; echo "ncu pers rc=$?"
ncu -i $W/pers.ncu-rep --page source --csv --print-source sass > $W/pers_src.csv 2>$W/pers_src.err
ncu -i $W/pers.ncu-rep --page details --csv > $W/pers_details.csv 2>&1
python3 tools/ncu_stalls.py $W/pers_src.csv > $W/pers_stalls.txt 2>&1
tar czf $OUT/a2.tgz -C $W .
cat $W/pages_tuned.log; tail -12 $W/pages_acc2.log; tail -12 $W/pages_3b.log
