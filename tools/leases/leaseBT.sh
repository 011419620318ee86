#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BT"; the batch reverted, it is commit 6c87991.) Lease BT (any card): a persistent instruction polls all its counters at once
# (one batch of acquire loads per poll) against f9f8db0's kernels (.device/prev.ron + v_prev.cu:
# one counter at a time, a round trip each), on main's layout (one wait per instruction) and
# with 48 QKV -> attention shards (.device/qa48.ron: an attention task waits for its three
# shards, ~9 SMs' QKV units, instead of all 132), persistent and pdl in one process, alternated
# twice (docs/perf.md "Every counter in one poll"). Then the GPU tests on the new build, the
# poll's machine code (cuobjdump, whether the acquire loads issue together) and, on an H200,
# `mkc probe latency` and a traced step. Also .device/: mkc, gpu_test.
LIMIT=420 ARCHIVE=bt.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    b new_$r
    b prev_$r --tune .device/prev.ron
    T=.device/qa48.ron b qa48_$r
    T=.device/qa48.ron b qa48prev_$r --tune .device/prev.ron
done
gpu_tests
$M kernels --model $T --persistent --cubin /tmp/p.cubin > /dev/null 2>&1
/usr/local/cuda/bin/cuobjdump -sass /tmp/p.cubin > $W/sass.txt 2>&1; echo "sass rc=$?"
grep -n "STRONG.GPU" $W/sass.txt | head -12; keep
grep -q H200 $W/gpu.txt && { probe_latency; traced new; }
