#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AZ"; its variant is in commit 643ff52.) Lease AZ (any card): the page math on the tensor cores by column subsets
# (docs/perf.md "The page math on the tensor cores, by column subsets"): `mkc probe pages` on
# main and on tools/variants/mma_segments.py with 4 and 8 accumulator sets, then alternating
# benches. Files (.device/): mkc; v_seg4.cu and v_seg8.cu (`python3
# tools/variants/mma_segments.py N`), written from the mkc.cu the binary was built from;
# seg4.ron and seg8.ron (`Tuning(kernels_cu: Some(".device/v_segN.cu"))`); tuned_seg4.ron and
# tuned_seg8.ron (models/llama1b_tuned.ron with that tuning, for the probe).
LIMIT=330 ARCHIVE=az.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for v in main seg4 seg8; do
    m=$T; [ $v != main ] && m=.device/tuned_$v.ron
    timeout 40 $M probe pages --model $m > $W/pages_$v.log 2>&1; echo "pages $v rc=$?"
    tail -12 $W/pages_$v.log; keep
done
b main_a; b seg4_a --tune .device/seg4.ron; b seg8_a --tune .device/seg8.ron
b main_b; b seg4_b --tune .device/seg4.ron; b seg8_b --tune .device/seg8.ron
b main_c; b seg4_c --tune .device/seg4.ron
