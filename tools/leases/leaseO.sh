#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease O: where the boundary hold's time goes, from the device trace: one traced decode step
# (`mkc run --timeline`, the persistent trace build) at main's limit (K = 1 on an H100, none on
# an H200), at 16 (none) and at 9, twice each; the per-kind phase tables (issuing, awaiting,
# staging, computing, finishing, between) are compared. docs/perf.md "Lease O".
LIMIT=200 ARCHIVE=o.tgz
source tools/leases/common.sh
t() {
    local n=$1; shift
    timeout 60 $M run $T --target persistent --tokens 16 --timeline $W/$n.json "$@" > $W/$n.log 2>&1
    echo "== $n rc=$? t=$SECONDS"; grep -A9 'us per SM' $W/$n.log | head -10; keep
}
t main_a; t k16a --tune .device/bi16.ron; t k9a --tune .device/bi9.ron
t main_b; t k16b --tune .device/bi16.ron; t k9b --tune .device/bi9.ron
