#!/bin/bash
# Lease AK: the GPU tests on d5bb853 (setup.rs's split-K store from MatvecWork: not yet run on
# a GPU), on whichever card comes. On an H200, lease AG's script (the held release probe,
# early_close, long_wait 4, the held ladder). On an H100, main twice with pdl, to check that
# d5bb853 did not move the step. Files: those of leaseAG.sh and .device/gpu_test.
LIMIT=200 ARCHIVE=ak.tgz
source tools/leases/common.sh
gpu_tests
if grep -q H200 $W/gpu.txt; then
    bash tools/leases/leaseAG.sh
else
    TARGETS=persistent,pdl b main_a; TARGETS=persistent,pdl b main_b
fi
