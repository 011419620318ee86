#!/bin/bash
# (Not yet run.) The forty-ninth session's second GPU call: lease FL (the 70B Llamas' shape:
# two layers checked on every target, then 80 unchecked on an H200), the YaRN oracle (lease
# FY's first step: transformers against mkc on a YaRN-scaled TinyLlama shape, persistent and
# pdl), then lease FI (OpenLLaMA at 12,800-byte pages, branch page-bytes-128's binary),
# archiving their logs into $OUT (fl.tgz, fy.tgz, fi.tgz). Any card. Call with timeout 600, carry .device (mkc,
# mkc_pages: tools/leases/leaseFI.sh says how to build it).
yarn() {
    LIMIT=400 ARCHIVE=fy.tgz
    source tools/leases/common.sh
    timeout 120 python3 tools/hf_check.py $M /tmp/hf_yarn --model yarn persistent pdl > $W/hf_yarn.log 2>&1
    echo "hf yarn rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_yarn.log | tail -4; keep
}
LIMIT=200 timeout 260 bash tools/leases/leaseFL.sh 2>&1 | tail -30
[ $SECONDS -lt 420 ] && (yarn)
left=$((560 - SECONDS))
[ $left -gt 60 ] && timeout $left bash tools/leases/leaseFI.sh 2>&1 | tail -60
