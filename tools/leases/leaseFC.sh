#!/bin/bash
# (Not yet run.) Lease FC: the transformers oracle (tools/hf_check.py: random-init checkpoints
# saved by transformers, mkc's logits against its fp32 and bf16 runs, teacher-forced over mkc's
# tokens) on what the forty-fifth session opened: SmolLM-135M (rows of 576 columns), two of
# Llama-2-13B's layers (32 KiB pages, 6 warps) and linear RoPE scaling (four TinyLlama-shaped
# layers, factor 4), and an MLP mkc zero-pads (5644 -> 5888 columns, four TinyLlama-shaped
# layers; Llama-2-7B's 11008 needs no padding any more) and dynamic NTK RoPE (plain within the
# context), persistent and pdl each. Any card.
# ~7 min: call with timeout ~570. Also .device/: mkc.
LIMIT=470 ARCHIVE=fc.tgz
source tools/leases/common.sh
hf() {
    [ $SECONDS -gt $LIMIT ] && { echo "hf $1 skipped (time)"; return; }
    timeout 170 python3 tools/hf_check.py $M /tmp/hf_$1 --model $1 persistent pdl > $W/hf_$1.log 2>&1
    echo "hf $1 rc=$? t=$SECONDS"; grep -E "PASSED|FAILED|rror|median" $W/hf_$1.log | tail -4; keep
}
hf smollm
hf linear
hf llama2_13b
hf padded
hf dynamic
