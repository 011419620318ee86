#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AS".) Lease AS (any card): the GPU tests (the attention probe's test included: its
# first run on a GPU); `mkc probe attention` on the tuned model with main's body and with
# `tools/variants/gqa_body.py`'s (each K and V read shared by a task's heads); the fold's upper
# bound (`tools/variants/edge_free.py o_proj`, and `attention`: an ablation, its checks fail);
# main against the GQA variant on the tuned layout (one head per task) and with
# attention_split 1 (four); then lease AR's caps if time is left. Files (.device/): gpu_test;
# v_gqa.cu (`python3 tools/variants/gqa_body.py > .device/v_gqa.cu`); gqa.ron
# (`Tuning(kernels_cu: Some(".device/v_gqa.cu"))`); tuned_gqa.ron (models/llama1b_tuned.ron
# with that tuning section); split1.ron (models/llama1b_tuned.ron with attention_split 1) and
# split1_gqa.ron (the same with the tuning section); v_free_o_proj.cu / free_o_proj.ron and
# v_free_attention.cu / free_attention.ron the same way; lease AR's cap files.
LIMIT=420 ARCHIVE=as.tgz
source tools/leases/common.sh
gpu_tests
for m in $T .device/tuned_gqa.ron; do
    n=$(basename $m .ron)
    timeout 120 $M probe attention --model $m > $W/attention_$n.log 2>&1; echo "attention $n rc=$?"
    tail -22 $W/attention_$n.log; keep
done
export TARGETS=persistent,pdl
b main_a; b cap4_a --tune .device/cap4.ron; b gqa_a --tune .device/gqa.ron; b free_o_a --tune .device/free_o_proj.ron
b main_b; b cap4_b --tune .device/cap4.ron; b gqa_b --tune .device/gqa.ron; b free_o_b --tune .device/free_o_proj.ron
b cap3_c --tune .device/cap3.ron; b free_att_c --tune .device/free_attention.ron
T=.device/split1.ron b split1_main; T=.device/split1_gqa.ron b split1_gqa
