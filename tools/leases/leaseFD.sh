#!/bin/bash
# (Not yet run.) Lease FD, issue 18's bar on an H200 with attention inside the O-projection:
# `mkc bench models/llama1b_fused.ron --targets persistent,pdl` (persistent fused, pdl on the
# same weights lowered unfused: one process, the bar's form) twice, alternated with the tuned
# file's persistent and pdl; then a traced fused step and a traced tuned one (neither ever
# traced on an H200) and `mkc probe latency` (the one-copy L2 hit the h200 profile lacks).
# On an H100 (lease FA2) fused beat pdl by 10-22 µs and the tuned persistent step by 9-16.
# Predicted (h200 profile, 4,500 GB/s): fused 673.6 µs, tuned persistent 708.9, pdl 717.1;
# scaling lease FA2's measured fused gain (half the model's) onto lease AF's H200 figures
# (persistent 750.4-751.7, pdl 720.8-722.0): fused ~735, so the bar (650) is not expected
# to be met; the point is where an H200 step's time goes. On another card it exits at once.
# ~5 min: call with timeout ~400. Also .device/: mkc.
LIMIT=300 ARCHIVE=fd.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200"; exit; }
F=models/llama1b_fused.ron
export TARGETS=persistent,pdl
T=$F b fused_a
b main_a
T=$F b fused_b
b main_b
T=$F traced fused
traced main
probe_latency
