#!/bin/bash
# Lease GB (forty-eighth session; an H200 was not to be had): on any card, lease FK (the
# boundary window's depth, knobs only), lease FL (the 70B shape: two layers checked on every
# target; the 80 layers are refused by memory on an H100), then the GPU tests (the operator
# check now includes two 70B layers on three warps; OpenLLaMA's attention check takes the
# model's scale), each cut to what is left of 560 s, archiving fk.tgz, fl.tgz and gt.tgz.
# Call with timeout 600, carry .device (mkc, gpu_test).
run() {
    local left=$((560 - SECONDS))
    [ $left -lt 60 ] && { echo "== $1 skipped (time)"; return; }
    local t=$(($2 < left ? $2 : left))
    echo "== $1 (at most $t s)"
    LIMIT=$((t - 60)) timeout $t bash tools/leases/$1 2>&1 | tail -40
}
run leaseFK.sh 250
run leaseFL.sh 200
tests() {
    ARCHIVE=gt.tgz
    source tools/leases/common.sh
    GT=$((560 - SECONDS - 10)) gpu_tests
    grep -E "llama3_70b|openllama|worst layer value|FAILED|off the|panicked" $W/gpu_test.log | head -12
}
[ $SECONDS -lt 480 ] && (tests)
