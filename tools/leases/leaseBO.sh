#!/bin/bash
# (Not yet run.) Lease BO (any card; for a call with little device time left): the data-flag
# variants alone, alternated twice with main: the residual stream's words tagged with their
# step, so that QKV, up/gate and the LM head poll their data, not counters
# (`tools/variants/data_flags.py`, persistent and pdl; .device/df.ron + v_df.cu), and with the
# QKV -> attention edge too (`data_flags.py attention`, persistent; .device/dfa.ron + v_dfa.cu).
# docs/perf.md "Data that flags itself". Also .device/: mkc. Leases BK (H200) and BN run the same
# and more where a call has the time.
LIMIT=300 ARCHIVE=bo.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    b main_$r
    b df_$r --tune .device/df.ron
    TARGETS=persistent b dfa_$r --tune .device/dfa.ron
done
