#!/bin/bash
# (Not yet run.) Lease BI (any card): why lease BH's operator check of split-KV attention failed
# (3 parts, 96 CTAs, `attn` rel L2 inf, where the end-to-end checks at 2 and 4 parts passed). The
# check now also compares the partial records themselves and names the worst one (head, part,
# maximum and sum against the CPU's, NaN outputs). Then the 1,024-token run at 2 parts with the
# CPU reference check: its parts span two attention chunks each, as the failed check's did,
# which no checked run has covered. docs/perf.md "Lease BH". Files (.device/): mkc, gpu_test,
# kv2.ron.
LIMIT=300 ARCHIVE=bi.tgz
source tools/leases/common.sh
timeout 150 .device/gpu_test --test-threads 1 every_operator > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"
grep -E "attention|worst|test result|panicked" $W/gpu_test.log | head -30; keep
timeout 200 $M bench .device/kv2.ron --targets persistent,pdl --trials 1 --prompt-len 1024 --tokens 64 > $W/long_kv2.log 2>&1; echo "long_kv2 rc=$? t=$SECONDS"
grep -E "floor|^  persistent|^  pdl|FAIL|PASS|rror|stall|growth" $W/long_kv2.log; keep
