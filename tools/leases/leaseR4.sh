#!/bin/bash
# (Run 2026-12-06 on an H100; docs/perf.md has its results.)
# Lease R4: where the words' time goes. Against the counters' binary of 6e99db2: main's words
# (relaxed counters, strong word loads), and tools/variants/words.py l1 (weak fetches that L1
# may cache), release (red.release + ld.acquire counters again), release_l1 (both) and nocheck
# (no flag checked; a timing bound). docs/perf.md "Where the words' time goes".
#   .device/mkc_base: the release binary of 6e99db2 (counters), stripped.
#   .device/v_MODE.cu, .device/MODE.ron: python3 tools/variants/words.py MODE > .device/v_MODE.cu;
#     Tuning(kernels_cu: Some(".device/v_MODE.cu"))
LIMIT=200 ARCHIVE=r4.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl M=.device/mkc_base b counters_a
TARGETS=persistent,pdl b words_a
b l1_a --tune .device/l1.ron
b release_a --tune .device/release.ron
b release_l1_a --tune .device/release_l1.ron
b nocheck --tune .device/nocheck.ron
M=.device/mkc_base b counters_b
b l1_b --tune .device/l1.ron
b release_l1_b --tune .device/release_l1.ron
