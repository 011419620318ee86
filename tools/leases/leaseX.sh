#!/bin/bash
# (Run 2026-12-06; lease Y on an H200, the others on H100s.)
# Lease X: copies per page (`tools/variants/one_copy_pages.py down|up_gate`, .device/oc_*.ron:
# Tuning(kernels_cu: Some(".device/v_oc_*.cu"))), an ablation timed with --no-check against
# main (also --no-check), alternating processes, `mkc bench models/llama1b_tuned.ron --targets
# persistent,pdl --trials 2 --no-check`, two rounds. docs/perf.md "Copies per page".
LIMIT=200 ARCHIVE=x.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
for r in 1 2; do
    b main$r --no-check; b down$r --no-check --tune .device/oc_down.ron; b ug$r --no-check --tune .device/oc_up_gate.ron
done
