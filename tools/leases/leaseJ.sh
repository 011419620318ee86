#!/bin/bash
# (Run 2026-12-06 on an H200, docs/perf.md "Lease J (one H200...)"; measured on the binary before the per-card default.)
# Lease J: the boundary in-flight limit on the H200 (issue 18's card): default 2 against the
# unlimited producer (16) and K = 1, 3; the late-closing windows (tools/variants/late_close.py);
# pdl beside main twice; the backend's GPU tests last. docs/perf.md "Lease J".
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 1, 3, 16)
#   .device/close_X.ron: Tuning(kernels_cu: Some(".device/v_close_X.cu")), X = landed, products,
#   from `python3 tools/variants/late_close.py X > .device/v_close_X.cu`
LIMIT=480 ARCHIVE=j.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b main_pdl1
b unlimited1 --tune .device/bi16.ron
b k1 --tune .device/bi1.ron
b landed1 --tune .device/close_landed.ron
b products1 --tune .device/close_products.ron
b k3 --tune .device/bi3.ron
TARGETS=persistent,pdl b main_pdl2
b unlimited2 --tune .device/bi16.ron
b products2 --tune .device/close_products.ron
b k1b --tune .device/bi1.ron
b landed2 --tune .device/close_landed.ron
[ $SECONDS -lt 500 ] && { ( time timeout 90 .device/gpu_test --test-threads 1 ) > $W/gpu_test.log 2>&1; echo "gpu_test rc=$?"; grep -E "test result|FAILED|panicked" $W/gpu_test.log | head -5; keep; }
