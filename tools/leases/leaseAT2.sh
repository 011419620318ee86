#!/bin/bash
# (Run 2026-12-06: docs/perf.md "Lease AT".) Lease AT2 (the H100 lease AT left warm): the stream cap's curve (2, 3, 6, 8 against main's
# profile 4), two rounds, then the persistent ablation ladder. Files: .device/s{2,3,6,8}.ron.
LIMIT=150 ARCHIVE=at2.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do b main_$r; for n in 2 3 6 8; do b s${n}_$r --tune .device/s$n.ron; done; done
[ $SECONDS -lt 170 ] && { timeout 80 $M bench $T --targets persistent --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -16 $W/ablate.log; keep; }
