#!/bin/bash
# (Not yet run.) Lease AS (any card): the GPU tests (the attention probe's test included: its
# first run on a GPU), `mkc probe attention` on the tuned model (the chain's and the persistent
# kernel's attention body alone, 1/2/4 query heads per task), and lease AR's cap runs if time
# is left. Files: .device/gpu_test, and lease AR's.
LIMIT=300 ARCHIVE=as.tgz
source tools/leases/common.sh
gpu_tests
timeout 120 $M probe attention --model $T > $W/attention.log 2>&1; echo "attention rc=$?"; tail -22 $W/attention.log; keep
export TARGETS=persistent,pdl
b main_c; b cap4_c --tune .device/cap4.ron; b cap3_c --tune .device/cap3.ron
b main_d; b cap4_d --tune .device/cap4.ron; b cap3_d --tune .device/cap3.ron
