#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease BC"; the variant, now main's code, is in commit 8c6ea75.) Lease BC (any card): the tensor-core loop for the O-projection and down, their
# inputs written as fragments by their producers (docs/perf.md "The tensor-core loop for the
# O-projection and down"): main against tools/variants/mma_l2_inputs.py, alternating. Files
# (.device/): mkc; v_l2.cu (`python3 tools/variants/mma_l2_inputs.py > .device/v_l2.cu`, from
# the mkc.cu the binary was built from) and l2.ron (`Tuning(kernels_cu: Some(".device/v_l2.cu"))`).
LIMIT=200 ARCHIVE=bc.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b l2_a --tune .device/l2.ron
b main_b; b l2_b --tune .device/l2.ron
b main_c; b l2_c --tune .device/l2.ron
