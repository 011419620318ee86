#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Split-KV's merge batch no larger than a thread's groups".) Lease BU (any card): on an H200, lease BK whole (issue 18's bar on main, with
# its variants). On another card, one traced step of each target for main's layout and for 2
# split-KV parts (.device/kv2.ron), persistent and pdl (`--timeline`): where the model's wrong
# ranking of 2 parts at P32 comes from (predicted persistent -2, pdl -23 µs; measured +22 to
# +30 for both: docs/perf.md "The chain model and split-KV at P32"). Also .device/: mkc.
grep -q H200 <(nvidia-smi --query-gpu=name --format=csv,noheader) && exec bash tools/leases/leaseBK.sh
LIMIT=300 ARCHIVE=bu.tgz
source tools/leases/common.sh
for n in main kv2; do
    [ $n = main ] && f=$T || f=.device/kv2.ron
    timeout 150 $M bench $f --targets persistent,pdl --trials 1 --timeline $W/$n.json > $W/${n}_tl.log 2>&1
    echo "$n traced rc=$? t=$SECONDS"; grep -E "^  (persistent|pdl) |operator boundaries|FAIL" $W/${n}_tl.log; keep
done
