#!/bin/bash
# (Not yet run.) Lease BR, the least an H200 call can bring back: issue 18's bar on main as it
# now is (persistent and pdl in one process, twice; last H200 figures lease AF's, persistent
# 750.4-751.7 µs, pdl 720.8-722.0) and `mkc probe latency` (the one-copy L2 hit the h200
# profile lacks). On another card it exits at once (lease BU traced main on an H100). Also
# .device/: mkc. Then, as time allows, a traced step of main (never traced on an H200).
LIMIT=120 ARCHIVE=br.tgz
source tools/leases/common.sh
grep -q H200 $W/gpu.txt || { echo "not an H200"; exit; }
export TARGETS=persistent,pdl
b main_a
b main_b
probe_latency
traced main
