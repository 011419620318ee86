#!/bin/bash
# (Run 2026-12-06 on an H100: the layout branch.) Lease AI: on an H200, lease AG (`leaseAG.sh`: probe latency, main against early_close.py and
# long_wait.py 4, the held ladder). On an H100, the held-out layouts again on the held kernel
# (each the tuned file with one line changed: .device/ao2.ron attention_o_proj 2, ug8.ron and
# ug2.ron up_gate_down 8 and 2, tp2.ron matvec_task_pages 2, as2.ron attention_split 2),
# alternating with the tuned file, persistent only, `--trials 2`.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash tools/leases/leaseAG.sh; fi
LIMIT=300 ARCHIVE=ai.tgz
source tools/leases/common.sh
for r in 1 2; do
    b main$r
    for f in ao2 ug8 ug2 tp2 as2; do T=.device/$f.ron b ${f}_$r; done
done
