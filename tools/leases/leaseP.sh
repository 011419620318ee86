#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease P: the hold around the release only (tools/variants/release_window.py) against main's
# window and the unlimited producer. On an H200: main (no limit) twice, release-only K = 1 and
# 2, the full window at K = 9. On an H100: main (K = 1, full window) twice, release-only K = 1
# twice, 16 once. docs/perf.md "The hold around the release only".
#   .device/rwK.ron: Tuning(persistent_boundary_inflight: Some(K), kernels_cu: Some(".device/v_release_window.cu"))
LIMIT=150 ARCHIVE=p.tgz
source tools/leases/common.sh
if grep -q H200 $W/gpu.txt; then
    b main_a; b rw1a --tune .device/rw1.ron; b rw2 --tune .device/rw2.ron; b main_b; b rw1b --tune .device/rw1.ron; b k9 --tune .device/bi9.ron
else
    b main_a; b rw1a --tune .device/rw1.ron; b main_b; b rw1b --tune .device/rw1.ron; b k16 --tune .device/bi16.ron
fi
