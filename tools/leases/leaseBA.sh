#!/bin/bash
# (Run 2026-12-06 on an H100: docs/perf.md "Lease BA"; the variant, now main's code, is in commit bfdf8c5.) Lease BA (any card): the tensor-core page loop where the input is staged
# (docs/perf.md "The tensor-core page loop where the input is staged"): main against
# tools/variants/mma_staged.py, three alternating rounds. Files (.device/): mkc; v_staged.cu
# (`python3 tools/variants/mma_staged.py > .device/v_staged.cu`, from the mkc.cu the binary was
# built from) and staged.ron (`Tuning(kernels_cu: Some(".device/v_staged.cu"))`).
LIMIT=300 ARCHIVE=ba.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b staged_a --tune .device/staged.ron
b main_b; b staged_b --tune .device/staged.ron
b main_c; b staged_c --tune .device/staged.ron
