#!/bin/bash
# (Run 2026-12-06 on an H100, docs/perf.md "Lease H"; the variant scripts it names are in commit ee2d040's tree.)
# Lease H: fewer copies in flight while the persistent consumers wait (tools/variants/
# throttle_wait.py K = 0, 2, 4) and the always-on cap (tools/variants/inflight.py K = 4, 3),
# interleaved with main (`mkc bench models/llama1b_tuned.ron --targets persistent --trials 2`).
# Variants (built here by the scripts, carried in .device/):
#   python3 tools/variants/throttle_wait.py K > .device/v_thrK.cu    (K = 0, 2, 4)
#   python3 tools/variants/throttle_wait.py 2 release > .device/v_thr2r.cu
#   python3 tools/variants/inflight.py K > .device/v_infK.cu          (K = 4, 3)
#   (each with a .device/NAME.ron: Tuning(kernels_cu: Some(".device/v_NAME.cu")))
source tools/leases/common.sh
b main1
b thr2a --tune .device/thr2.ron
b thr0a --tune .device/thr0.ron
b thr2ra --tune .device/thr2r.ron
b thr4a --tune .device/thr4.ron
b main2
b inf4 --tune .device/inf4.ron
b thr2b --tune .device/thr2.ron
b thr0b --tune .device/thr0.ron
b thr2rb --tune .device/thr2r.ron
b inf3 --tune .device/inf3.ron
b thr4b --tune .device/thr4.ron
b main3
tar czf $OUT/h.tgz -C $W .
