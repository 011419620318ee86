#!/bin/bash
# Lease E (H100): the h100 profile's predictions on other layouts, and the persistent ring's
# slot count on this card.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
M=.device/mkc; T=models/llama1b_tuned.ron; W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
b() { local n=$1; shift; timeout 150 $M bench "$@" > $W/$n.log 2>&1; echo "$n rc=$?"; tail -5 $W/$n.log; }
b main1 $T --targets persistent,pdl --trials 2
b slots8 $T --targets persistent --trials 2 --tune .device/slots8.ron
b slots11 $T --targets persistent --trials 2 --tune .device/slots11.ron
b anchors llama1b --targets persistent,pdl,graph --trials 1
b main2 $T --targets persistent --trials 2
b llama3b llama3b --targets persistent,pdl --trials 1
b traced $T --targets persistent,pdl --trials 1 --timeline $W/t.json
tar czf $OUT/e.tgz -C $W .
