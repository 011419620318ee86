#!/bin/bash
# (Run 2026-12-06 on an H100.) Lease AE: lease AD's speeds damped. Dealing by the probe's speeds (12 SMs at 1.38x) cost the
# persistent step 85 µs on an H100 (lease AD); its trace had those SMs' up/gate 11% slower
# than the median SM. Here the speeds are raised to the power 0.5 and 0.25 (1.17x and 1.08x
# for the fast SMs), alternating with the SM table alone (no speeds) and 15de20d.
LIMIT=420 ARCHIVE=ae.tgz TARGETS=persistent,pdl
source tools/leases/common.sh
timeout 60 $M probe sm-speeds -o $W/speeds.ron > $W/probe.log 2>&1; echo "probe rc=$?"; tail -3 $W/probe.log
for e in 0.5 0.25; do
    python3 - $W/speeds.ron $e > $W/speeds_$e.ron <<'PY'
import re, sys
text = open(sys.argv[1]).read(); e = float(sys.argv[2])
head, tail = text.split("speeds:")
v = [float(x) ** e for x in re.findall(r"[0-9]+\.[0-9]+", tail)]
m = sum(v) / len(v)
print(head + "speeds: [" + ", ".join(f"{x / m:.5f}" for x in v) + "],\n)")
PY
done
keep
for r in 1 2; do
    M=.device/mkc_head b head$r; b table$r
    b half$r --sm-speeds $W/speeds_0.5.ron; b quarter$r --sm-speeds $W/speeds_0.25.ron
done
