#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AQ (any card): main against `tools/variants/cap.py 4` and `6` (at most C pages in
# flight outside the boundary window too), alternating, persistent and pdl (the control); a
# traced step of cap 4 with layer 8's table (its release column). Files: .device/v_cap4.cu,
# .device/v_cap6.cu, .device/cap4.ron, .device/cap6.ron.
LIMIT=300 ARCHIVE=aq.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; b cap4_a --tune .device/cap4.ron; b cap6_a --tune .device/cap6.ron
b main_b; b cap4_b --tune .device/cap4.ron; b cap6_b --tune .device/cap6.ron
timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace_cap4.json --tune .device/cap4.ron > $W/trace_cap4.log 2>&1
echo "trace cap4 rc=$?"; grep "traced step" $W/trace_cap4.log | sed 's/.*traced step/traced step/'
python3 tools/layer_table.py $W/trace_cap4.json 8; keep
