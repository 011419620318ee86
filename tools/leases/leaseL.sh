#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease L: K = 9 (a page is held back at a boundary only while nine are in flight, i.e. while
# the page the consumers take next has not landed) against the unlimited producer (16) and
# main's per-card default, on whichever card comes. docs/perf.md "Lease L".
#   .device/biK.ron: Tuning(persistent_boundary_inflight: Some(K))   (K = 2, 6, 9, 16)
#   .device/always9.ron: K = 9 with kernels_cu .device/v_always_held.cu
#   (python3 tools/variants/always_held.py > .device/v_always_held.cu: the window never closes)
LIMIT=300 ARCHIVE=l.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b main_pdl
b k9a --tune .device/bi9.ron
b k16a --tune .device/bi16.ron
b k2a --tune .device/bi2.ron
b k9b --tune .device/bi9.ron
b k16b --tune .device/bi16.ron
b k2b --tune .device/bi2.ron
b always9a --tune .device/always9.ron
b always9b --tune .device/always9.ron
b k6 --tune .device/bi6.ron
