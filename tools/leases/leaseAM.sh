#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AM (any card): main against `tools/variants/held_through.py attention|o|short` (the
# boundary hold kept through those instructions), alternating processes, persistent and pdl
# (pdl: main's chain in every build); a traced step of the best-looking mode (attention's) with
# layer 8's table. On an H200, `mkc probe latency` last. Files: .device/v_held_MODE.cu,
# .device/held_MODE.ron (`Tuning(kernels_cu: Some(".device/v_held_MODE.cu"))`).
LIMIT=400 ARCHIVE=am.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a; for m in attention o short; do b ${m}_a --tune .device/held_$m.ron; done
b main_b; for m in attention o short; do b ${m}_b --tune .device/held_$m.ron; done
if [ $SECONDS -lt 440 ]; then
    timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace_att.json --tune .device/held_attention.ron > $W/trace_att.log 2>&1
    echo "trace attention rc=$?"; grep "traced step" $W/trace_att.log | sed 's/.*traced step/traced step/'
    python3 tools/layer_table.py $W/trace_att.json 8; keep
fi
if grep -q H200 $W/gpu.txt && [ $SECONDS -lt 480 ]; then
    timeout 100 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -12 $W/latency.log; keep
fi
