#!/bin/bash
# (Run 2026-12-06 on an H100, docs/perf.md "Lease I".)
# Lease I: the boundary in-flight limit as main code (tuning.persistent_boundary_inflight,
# default 2) against the unlimited producer (16) and its neighbours (1, 3), with pdl beside it
# twice, and the backend's GPU tests on this build; the archive is refreshed after each step.
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 1, 3, 16)
LIMIT=150 ARCHIVE=i.tgz  # the session's device time left allows ~3 minutes
source tools/leases/common.sh
TARGETS=persistent,pdl b main_pdl1
b unlimited1 --tune .device/bi16.ron
( time timeout 100 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked" $W/gpu_test.log | head -5; keep
TARGETS=persistent,pdl b main_pdl2
b unlimited2 --tune .device/bi16.ron
b k3 --tune .device/bi3.ron
b k1 --tune .device/bi1.ron
