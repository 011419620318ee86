#!/bin/bash
# (Not yet run.) The forty-seventh session's GPU work in one call, since a machine's start costs
# minutes of the budget and often fails: on an H200, lease FD first (issue 18's bar with the
# fused file, traced), then lease FG (7646cf9 against 41e5fcd; OpenLLaMA-3B's padded heads
# against transformers and the CPU reference) and lease FE (pdl's ablation ladder on the
# SmolLMs), each cut to what is left of 560 s. Each lease archives its own logs into $OUT
# (fd.tgz, fg.tgz, fe.tgz) after every step. Call with timeout 600. Also .device/: mkc,
# mkc_prev.
run() {
    local left=$((560 - SECONDS))
    [ $left -lt 60 ] && { echo "== $1 skipped (time)"; return; }
    echo "== $1 (at most $(($2 < left ? $2 : left)) s)"
    timeout $(($2 < left ? $2 : left)) bash tools/leases/$1 2>&1 | tail -60
}
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && run leaseFD.sh 300
run leaseFG.sh 320
run leaseFE.sh 220
