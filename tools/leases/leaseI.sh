#!/bin/bash
# Lease I: the boundary in-flight limit as main code (tuning.persistent_boundary_inflight,
# default 2) against the unlimited producer (16) and its neighbours (1, 3), with pdl beside it
# twice; first the backend's GPU tests on this build.
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 1, 3, 16)
LIMIT=200  # the session's device time left allows ~4 minutes
source tools/leases/common.sh
( time timeout 120 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked" $W/gpu_test.log | head -5
TARGETS=persistent,pdl b main_pdl1
b unlimited1 --tune .device/bi16.ron
TARGETS=persistent,pdl b main_pdl2
b unlimited2 --tune .device/bi16.ron
b k3 --tune .device/bi3.ron
b k1 --tune .device/bi1.ron
tar czf $OUT/i.tgz -C $W .
