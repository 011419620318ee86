#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AN (any card; measurement only): traced steps of `tools/variants/end_marks.py` (the
# end of each persistent instruction split: attention's output loop, its store, every
# instruction's end barrier; see the script), two of them, with layers 4, 8 and 12's tables;
# the untraced step is main's machine code, so one main bench beside them as a check. Files:
# .device/v_marks.cu, .device/marks.ron (`Tuning(kernels_cu: Some(".device/v_marks.cu"))`).
LIMIT=300 ARCHIVE=an.tgz
source tools/leases/common.sh
TARGETS=persistent,pdl b main
for n in 1 2; do
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/marks$n.json --tune .device/marks.ron > $W/marks$n.log 2>&1
    echo "marks $n rc=$?"; grep "traced step" $W/marks$n.log | sed 's/.*traced step/traced step/'
    for l in 4 8 12; do python3 tools/layer_table.py $W/marks$n.json $l; done; keep
done
