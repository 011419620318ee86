#!/bin/bash
# (Not yet run.) Lease BE (any card): the persistent step's dependency chain alone (the new
# `weights` rung of `mkc bench --ablate`: no weight page copied, each landing as soon as its slot
# is free) and how each target's step grows with the context (bench's new growth line), at the
# workload's P32/D128 and at a 1,024-token prompt. docs/perf.md "The dependency chain alone and
# the step's growth with the context (lease BE, predicted)". Files (.device/): mkc.
LIMIT=420 ARCHIVE=be.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
b main_a
timeout 120 $M bench $T --targets persistent --trials 1 --ablate > $W/ladder.log 2>&1; echo "ladder rc=$?"; grep -E "^  persistent|growth" $W/ladder.log; keep
# The CPU reference replays 1,088 positions: a longer limit than b's.
timeout 240 $M bench $T --targets persistent,pdl --trials 2 --prompt-len 1024 --tokens 64 > $W/long_a.log 2>&1; echo "long_a rc=$? t=$SECONDS"; grep -E "floor|^  persistent|^  pdl|FAIL|rror|stall|growth" $W/long_a.log; keep
timeout 120 $M bench $T --targets persistent --trials 1 --ablate --prompt-len 1024 --tokens 64 --no-check > $W/ladder_long.log 2>&1; echo "ladder_long rc=$?"; grep -E "^  persistent|growth" $W/ladder_long.log; keep
b main_b; grep growth $W/main_a.log $W/main_b.log
