#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BN".) Lease BN (any card), alternated twice:
# - the consumers' page wait spinning on test_wait (`tools/variants/spin_wait.py`) against
#   main's try_wait, on the ladder's last rung (every kind of work removed: 247 µs on an H100 in
#   lease BI, ~0.75 µs per page a warp takes) and on the full step, persistent only (docs/perf.md
#   "The ring's page handshake"; .device/spin.ron + v_spin.cu, spin_allrm.ron + v_spin_allrm.cu
#   (v_allrm.cu's defines above v_spin.cu), allrm.ron + v_allrm.cu);
# - the residual stream's words tagged with their step, so that QKV, up/gate and the LM head
#   poll their data, not counters (`tools/variants/data_flags.py`, persistent and pdl;
#   .device/df.ron + v_df.cu), and with the QKV -> attention edge too (`data_flags.py
#   attention`, persistent; .device/dfa.ron + v_dfa.cu): docs/perf.md "Data that flags itself".
# Then split-KV's merge in one round trip (`tools/variants/merge_batch.py`; .device/mb.ron +
# v_mb.cu, with kv2.ron and kv4.ron): docs/perf.md "Split-KV's merge in one round trip".
# Then the QKV -> attention edge in 48 shards (`vtp_shards.qkv_attention: 48`: one per head's
# rows of q, k and v) against main, persistent and pdl, twice (docs/perf.md "Attention waits
# for its own heads' QKV units"). Also .device/: mkc.
LIMIT=380 ARCHIVE=bn.tgz
source tools/leases/common.sh
export TARGETS=persistent
for r in a b; do
    b main_$r
    TARGETS=persistent,pdl b df_$r --tune .device/df.ron
    b dfa_$r --tune .device/dfa.ron
    b spin_$r --tune .device/spin.ron
    rung allrm_$r .device/allrm.ron 60
    rung spin_allrm_$r .device/spin_allrm.ron 60
done
# Split-KV's merge in one round trip (tools/variants/merge_batch.py; .device/mb.ron + v_mb.cu):
# 2 parts at P32/D128 (.device/kv2.ron), checked, then the workload's 4 parts at P1024/T64.
# 4 parts at P32 once, checked (the long runs are not).
for r in a b; do
    TARGETS=persistent,pdl T=.device/kv2.ron b kv2_$r
    TARGETS=persistent,pdl T=.device/kv2.ron b kv2mb_$r --tune .device/mb.ron
done
TARGETS=persistent,pdl T=.device/kv4.ron b kv4mb --tune .device/mb.ron
for r in a b; do
    BT=150 TARGETS=persistent,pdl b long_$r --prompt-len 1024 --tokens 64 --no-check
    BT=150 TARGETS=persistent,pdl b longmb_$r --prompt-len 1024 --tokens 64 --no-check --tune .device/mb.ron
done
sed 's/vtp_shards: (up_gate_down: 4)/vtp_shards: (qkv_attention: 48, up_gate_down: 4)/' $T > /tmp/qa48.ron
grep -q "qkv_attention: 48" /tmp/qa48.ron || { echo "qa48: the tuned file's vtp_shards line changed"; exit; }
export TARGETS=persistent,pdl
for r in a b; do
    b tuned_$r
    T=/tmp/qa48.ron b qa48_$r
done
