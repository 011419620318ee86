#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease AW"; its variant, tools/variants/mma_pages.py, is in commit 5b801b5.) Lease AW (any card): the page math on the tensor cores
# (docs/perf.md "The page math on the tensor cores"): `mkc probe pages` on main and on the
# three modes of tools/variants/mma_pages.py (model files naming the variant as kernels_cu), then
# alternating benches. Files (.device/): mkc; v_mma_MODE.cu for MODE hi, hilo, hilo2
# (`python3 tools/variants/mma_pages.py MODE`), mma_MODE.ron
# (`Tuning(kernels_cu: Some(".device/v_mma_MODE.cu"))`), tuned_mma_MODE.ron
# (models/llama1b_tuned.ron with that tuning).
LIMIT=220 ARCHIVE=aw.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for v in main hilo2 hi hilo; do
    m=$T; [ $v != main ] && m=.device/tuned_mma_$v.ron
    timeout 40 $M probe pages --model $m > $W/pages_$v.log 2>&1; echo "pages $v rc=$?"
    tail -14 $W/pages_$v.log; keep
done
b main_a; b hilo2_a --tune .device/mma_hilo2.ron; b hi_a --tune .device/mma_hi.ron
b main_b; b hilo2_b --tune .device/mma_hilo2.ron; b hi_b --tune .device/mma_hi.ron
b hilo_a --tune .device/mma_hilo.ron; b main_c; b hilo2_c --tune .device/mma_hilo2.ron
