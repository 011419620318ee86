#!/bin/bash
# Lease GA (forty-eighth session, when machines were lent again): lease FL (the 70B Llamas'
# shape: two layers checked on every target, then all 80 unchecked, 132.5 GiB: the call asks
# for an H200), then lease FK (the boundary window's depth, knobs only), each cut to what is
# left of 560 s, archiving fl.tgz and fk.tgz into $OUT. Predictions: docs/perf.md (leases FL,
# FK). Call with timeout 600, needs_h200, carry .device (mkc).
run() {
    local left=$((560 - SECONDS))
    [ $left -lt 60 ] && { echo "== $1 skipped (time)"; return; }
    local t=$(($2 < left ? $2 : left))
    echo "== $1 (at most $t s)"
    LIMIT=$((t - 60)) timeout $t bash tools/leases/$1 2>&1 | tail -40
}
run leaseFL.sh 300
run leaseFK.sh 260
