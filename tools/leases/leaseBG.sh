#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BG".) Lease BG (any card): the held ladder with the dependency chain split. The
# weights rung (no weight page copied) is the persistent step's dependency chain alone; four new
# rungs remove attention, the activation loads or the page math from that chain, and last all of
# its work with its waits (what is left: the instruction streams' dispatch). docs/perf.md "The
# dependency chain split (lease BG, predicted)". Files (.device/): mkc. Then, for the step's
# growth, the same ladder at a 1,024-token prompt (`--no-check`: the ablated builds are unchecked
# anyway, and the full step's check ran in lease BF).
LIMIT=420 ARCHIVE=bg.tgz
source tools/leases/common.sh
ladder() {  # NAME [ARGS]
    local n=$1; shift
    [ $SECONDS -gt $LIMIT ] && { echo "$n skipped (time)"; return; }
    timeout 200 $M bench $T --targets persistent --trials 2 --ablate "$@" > $W/$n.log 2>&1; echo "$n rc=$? t=$SECONDS"
    grep -E "floor|^  persistent|FAIL|rror|stall" $W/$n.log | sed 's/.*read bandwidth/bw/'; keep
}
ladder ladder_a
ladder ladder_long --prompt-len 1024 --tokens 64 --no-check
ladder ladder_b
