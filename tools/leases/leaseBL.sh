#!/bin/bash
# (Run 2026-12-07 on an H100 at deb9720, right after leases BI and BJ on the warm machine:
# docs/perf.md "Leases BI, BJ, BL, BM".) Lease BL: main's 12 ring slots at P32/D128 against 11
# (.device/s11.ron) and 13, four more rounds, persistent only; then lease BM: main against 8
# slots at P1024/T64 (the workload's 4 split-KV parts), unchecked. Files (.device/): mkc, s11.ron.
LIMIT=330 ARCHIVE=bl.tgz
source tools/leases/common.sh
export TARGETS=persistent
echo 'Tuning(persistent_slots: Some(13))' > /tmp/s13.ron
echo 'Tuning(persistent_slots: Some(8))' > /tmp/s8.ron
for r in c d e f; do
    b main_$r
    b s11_$r --tune .device/s11.ron
    b s13_$r --tune /tmp/s13.ron
done
for r in a b; do
    b long_main_$r --prompt-len 1024 --tokens 64 --no-check
    b long_s8_$r --prompt-len 1024 --tokens 64 --no-check --tune /tmp/s8.ron
done
