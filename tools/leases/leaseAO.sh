#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AO (any card): main against `tools/variants/own_pages_only.py` (only the running
# instruction's pages at full depth), alternating, persistent and pdl (the control); a traced
# step of the variant with `end_marks`-free layer tables. Files: .device/v_own.cu,
# .device/own.ron (`Tuning(kernels_cu: Some(".device/v_own.cu"))`).
LIMIT=300 ARCHIVE=ao.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b own_a --tune .device/own.ron; b main_b; b own_b --tune .device/own.ron
timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace_own.json --tune .device/own.ron > $W/trace_own.log 2>&1
echo "trace own rc=$?"; grep "traced step" $W/trace_own.log | sed 's/.*traced step/traced step/'
python3 tools/layer_table.py $W/trace_own.json 8; keep
