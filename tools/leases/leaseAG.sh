#!/bin/bash
# (Called five times on 2026-12-06: H100s each time, so it exited; not yet run on an H200.) Lease AG: the H200 with the hold on (the h200 profile's K = 1 since lease AF). Only on an
# H200 (an H100 exits at once): `mkc probe latency` (the held release for the h200 profile:
# a release after a store beside one bulk copy per SM), main twice with pdl alternating with
# `tools/variants/early_close.py` (the window closed at the counter wait's end), and main's
# ablation ladder held; and `tools/variants/long_wait.py 4` (4 copies in flight while an
# O-projection waits for attention). Files: .device/v_early_close.cu, .device/ec1.ron,
# .device/v_long_wait4.cu, .device/lw4.ron.
LIMIT=200 ARCHIVE=ag.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
timeout 150 $M probe latency > $W/latency.log 2>&1; echo "latency rc=$?"; tail -25 $W/latency.log; keep
TARGETS=persistent,pdl b main_a; b ec_a --tune .device/ec1.ron; b lw4_a --tune .device/lw4.ron
TARGETS=persistent,pdl b main_b; b ec_b --tune .device/ec1.ron; b lw4_b --tune .device/lw4.ron
[ $SECONDS -lt 180 ] && { timeout 150 $M bench $T --targets persistent,pdl --trials 1 --ablate > $W/ablate.log 2>&1; echo "ablate rc=$?"; tail -22 $W/ablate.log; keep; }
