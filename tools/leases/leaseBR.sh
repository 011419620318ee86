#!/bin/bash
# (Not yet run.) Lease BR, the least an H200 call can bring back: issue 18's bar on main as it
# now is (persistent and pdl in one process, twice; last H200 figures lease AF's, persistent
# 750.4-751.7 µs, pdl 720.8-722.0) and `mkc probe latency` (the one-copy L2 hit the h200
# profile lacks). On another card: one traced persistent step of main (`--timeline`, for the
# model's attention share: 49 µs predicted against 21 measured in lease BP's ladder). Also
# .device/: mkc.
LIMIT=120 ARCHIVE=br.tgz
source tools/leases/common.sh
if ! grep -q H200 $W/gpu.txt; then
    traced main
    exit
fi
export TARGETS=persistent,pdl
b main_a
b main_b
probe_latency
