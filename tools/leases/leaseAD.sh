#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AD: SM speeds. The GPU tests on the new build (the persistent kernel now takes its
# stream by %smid through the SM table, found by k_smids), `mkc probe sm-speeds` twice (are the
# speeds a property of the chip: the same SMs fast in both?), then alternating processes of
# `mkc bench models/llama1b_tuned.ron --trials 2`: the session's starting binary
# (.device/mkc_head, 15de20d), the new build without speeds (the SM table alone) and with
# `--sm-speeds` (round robin dealt by speed), pdl beside each; last a traced step with speeds
# and `tools/sm_speeds.py` on its LM head and up/gate. Files: .device/mkc_head, .device/gpu_test.
LIMIT=420 ARCHIVE=ad.tgz
source tools/leases/common.sh
gpu_tests
for r in 1 2; do
    timeout 60 $M probe sm-speeds -o $W/speeds$r.ron > $W/probe$r.log 2>&1; echo "probe$r rc=$?"; cat $W/probe$r.log | tail -4
done
keep
python3 - $W/speeds1.ron $W/speeds2.ron <<'PY'
import re, sys, statistics
a, b = ([float(x) for x in re.findall(r"[0-9]+\.[0-9]+", open(f).read().split("speeds:")[1])] for f in sys.argv[1:3])
ma, mb = statistics.mean(a), statistics.mean(b)
cov = sum((x - ma) * (y - mb) for x, y in zip(a, b)); r = cov / (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
print(f"speeds: {len(a)} SMs, run 1 min {min(a):.3f} max {max(a):.3f}, run 2 min {min(b):.3f} max {max(b):.3f}, correlation {r:.3f}")
PY
S="--sm-speeds $W/speeds1.ron"
for r in 1 2; do
    TARGETS=persistent,pdl M=.device/mkc_head b head$r
    TARGETS=persistent,pdl b table$r
    TARGETS=persistent,pdl b speeds$r $S
done
timeout 90 $M bench $T --targets persistent --trials 1 --timeline $W/trace.json $S > $W/trace.log 2>&1
echo "trace rc=$?"; grep -A10 'us per SM' $W/trace.log | head -11
for kind in lm_head up_gate; do python3 tools/sm_speeds.py $W/trace.json $kind; done; keep
