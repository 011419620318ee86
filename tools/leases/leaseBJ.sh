#!/bin/bash
# (Run 2026-12-07 on an H100 at deb9720, its variant since removed: docs/perf.md "Leases BI, BJ, BL, BM".) Lease BJ (any card; after lease BI on the same machine): the persistent
# producer's next descriptors ahead (`tools/variants/producer_ahead.py`) against main, on the
# full step and on the ladder's two chain rungs (every kind of work removed; weights only),
# whose builds are variants of mkc.cu with the ablation macros defined. docs/perf.md "The
# producer's next descriptors ahead". Files (.device/): mkc, pa.ron + v_producer_ahead.cu
# (`python3 tools/variants/producer_ahead.py`), allrm.ron + v_allrm.cu, wonly.ron + v_wonly.cu,
# pa_allrm.ron + v_pa_allrm.cu, pa_wonly.ron + v_pa_wonly.cu (the ablation macros' defines,
# under `#ifdef MKC_PERSISTENT`, above main's or the variant's mkc.cu). Also main's 12 ring
# slots (attention's q and scores share the input vector's bytes) against 11 (s11.ron).
LIMIT=300 ARCHIVE=bj.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    b main_$r
    b s11_$r --tune .device/s11.ron
    b pa_$r --tune .device/pa.ron
    rung allrm_$r .device/allrm.ron
    rung pa_allrm_$r .device/pa_allrm.ron
    rung wonly_$r .device/wonly.ron
    rung pa_wonly_$r .device/pa_wonly.ron
done
