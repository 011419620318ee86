#!/bin/bash
# (Not yet run.) Lease FE: where pdl's time goes on a small model. On SmolLM-135M (30 layers,
# 576 wide, 151 kernels a step) lease FB measured pdl at 540.5 µs where the model predicts
# 363.4 (-32.8%; graph +3.9%, persistent +0.6%), and on SmolLM-360M 615.7 against 572.7; on
# Llama-2-13B and CodeLlama-34B pdl is within 1.6%. Charging each CTA's ring pages' math after
# its release fits SmolLM-135M (+0.5%) but puts -360M at +24% and Llama-3.2-1B at +7.5% (a
# trial, not kept: docs/perf.md). `mkc bench --ablate` on both SmolLMs, pdl and graph, says
# which kind of work the missing ~1.2 µs a kernel is (attention; the activation loads; the page
# math; the waits; the weight stream alone), each rung beside the simulator's saving. Any card. ~4 min: call with timeout ~300. Also .device/: mkc.
LIMIT=200 ARCHIVE=fe.tgz
source tools/leases/common.sh
$M model tests/configs/smollm-135m -o $W/smol.ron || exit 1
$M model tests/configs/smollm-360m -o $W/smol360.ron || exit 1
export TARGETS=pdl,graph
T=$W/smol.ron BT=120 b smol_ablate --ablate
grep -A16 "ablation (same" $W/smol_ablate.log
T=$W/smol360.ron BT=120 b smol360_ablate --ablate
grep -A16 "ablation (same" $W/smol360_ablate.log
