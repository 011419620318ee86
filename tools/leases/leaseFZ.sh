#!/bin/bash
# (Not yet run.) The forty-ninth session's first GPU call (a machine's start costs minutes of
# the budget and often fails): lease FK (the boundary window's depth, knobs only: the model's
# new prediction that K = 2 gains ~24 µs on an H200), then lease FH (the fused file's ablation
# ladder, persistent and pdl; the GPU tests on the fixed attention check; pdl's ladder on
# OpenLLaMA-3B), each cut to what is left of 560 s and archiving its logs into $OUT (fk.tgz,
# fh.tgz). Any card. Call with timeout 600, carry .device (mkc, gpu_test). The second call is
# tools/leases/leaseFZ2.sh.
run() {
    local left=$((560 - SECONDS))
    [ $left -lt 60 ] && { echo "== $1 skipped (time)"; return; }
    echo "== $1 (at most $(($2 < left ? $2 : left)) s)"
    LIMIT=$(( ($2 < left ? $2 : left) - 40 )) timeout $(($2 < left ? $2 : left)) bash tools/leases/$1 2>&1 | tail -60
}
run leaseFK.sh 240
run leaseFH.sh 320
