#!/bin/bash
# (Run 2026-12-07 on an H100, its other-card half: docs/perf.md "Lease BN".) Lease BQ: main's
# split-KV merge in one round trip (docs/perf.md "Lease BN"), verified: the GPU tests (every
# split-KV variant's operators: 2, 3 and 4 parts, llama3b's 8), then 2 and 4 parts at
# P32/D128, checked, persistent and pdl (.device/kv2.ron, kv4.ron). On an H200 first issue
# 18's bar (main, persistent and pdl in one process, twice) and `mkc probe latency`. Also
# .device/: mkc and gpu_test built from main.
LIMIT=240 ARCHIVE=bq.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
if grep -q H200 $W/gpu.txt; then
    b main_a
    b main_b
    probe_latency
fi
gpu_tests
T=.device/kv2.ron b kv2
T=.device/kv4.ron b kv4
