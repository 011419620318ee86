#!/bin/bash
# Writes the kernels of commit REV (default HEAD) as .device/v_prev.cu and a Tuning file
# .device/prev.ron selecting them (`tuning.kernels_cu`), for a lease's A/B against the working
# tree's kernels (common.sh's `ab`): run here, before the lease, with .device carried.
# usage: bash tools/leases/prev.sh [REV]
set -e
rev=${1:-HEAD}
mkdir -p .device
git show "$rev:backend/kernels/mkc.cu" > .device/v_prev.cu
echo 'Tuning(kernels_cu: Some(".device/v_prev.cu"))' > .device/prev.ron
echo "prev.sh: .device/v_prev.cu is $(git rev-parse --short "$rev")'s kernels"
