#!/bin/bash
# (Not yet run.) The forty-eighth session's GPU work in one call (a machine's start costs minutes
# of the budget and often fails): lease FH (the fused file's ablation ladder, persistent and
# pdl; the GPU tests on the fixed attention check; pdl's ladder on OpenLLaMA-3B), the YaRN
# oracle (lease FY's first step), then lease FI (OpenLLaMA at 12,800-byte pages, branch
# page-bytes-128's binary), each cut to what is left of 560 s and archiving its logs into $OUT
# (fh.tgz, fy.tgz, fi.tgz). Any card. Call with timeout 600. Also .device/: mkc, gpu_test,
# mkc_pages (tools/leases/leaseFI.sh says how to build it).
run() {
    local left=$((560 - SECONDS))
    [ $left -lt 60 ] && { echo "== $1 skipped (time)"; return; }
    echo "== $1 (at most $(($2 < left ? $2 : left)) s)"
    timeout $(($2 < left ? $2 : left)) bash tools/leases/$1 2>&1 | tail -60
}
run leaseFH.sh 300
yarn() {
    LIMIT=400 ARCHIVE=fy.tgz
    source tools/leases/common.sh
    timeout 120 python3 tools/hf_check.py $M /tmp/hf_yarn --model yarn persistent pdl > $W/hf_yarn.log 2>&1
    echo "hf yarn rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_yarn.log | tail -4; keep
}
[ $SECONDS -lt 440 ] && (yarn)
run leaseFI.sh 260
