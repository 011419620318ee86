#!/bin/bash
# (Not yet run.) Lease FB: checkpoint geometries the kernels took for the first time in the
# forty-fifth session, on random weights, as `mkc model` lowers their config.json: SmolLM-135M
# (rows of 576 columns: 3 lane rounds, the last partial) and -360M (960), all layers, checked
# against the CPU reference at three positions and across targets; Llama-2-13B (32 KiB pages,
# 6 consumer warps, the MLP in 8 shards, pages holding 2 of the 3 rows that fit), two layers
# checked, then all 40 and CodeLlama-34B's 48 (32 KiB pages, 4 warps) timed only
# (`--no-check`: the CPU reference of the whole model would outlast the call).
# Predicted (docs/perf.md, forty-fifth session), persistent / pdl / graph µs, h100 profile at
# 3,160 GB/s: SmolLM-135M 573.0 / 362.3 / 701.6; -360M 631.7 / 565.3 / 897.4; 13B two layers
# 574.9 / 537.6 / 566.6; 13B 9,283.3 / 8,687.2 / 9,284.7; 34B 23,434.2 / 22,025.7 /
# 22,661.5. h200 at 4,500: SmolLM-135M 689.3 / 432.9 / 790.9; -360M 749.4 / 609.8 / 948.2;
# 13B 6,830.0 / 6,134.9 / 6,805.9; 34B 16,705.1 / 15,531.5 / 16,256.2. Any card (34B's 68 GB
# of weights fit an H100's 80). ~8 min: call with timeout ~570. Also .device/: mkc.
LIMIT=470 ARCHIVE=fb.tgz
source tools/leases/common.sh
C=tests/configs
for c in l13:llama-2-13b cl34:codellama-34b smol:smollm-135m smol360:smollm-360m; do
    $M model $C/${c#*:} -o $W/${c%%:*}.ron || exit 1
done
sed 's/layers: 40/layers: 2/' $W/l13.ron > $W/l13_2.ron
export TARGETS=persistent,pdl,graph
T=$W/smol.ron b smol
T=$W/smol360.ron b smol360
T=$W/l13_2.ron b l13_two
T=$W/l13_2.ron b l13_two_b
T=$W/l13.ron BT=150 b l13 --no-check
T=$W/cl34.ron BT=200 b cl34 --no-check
