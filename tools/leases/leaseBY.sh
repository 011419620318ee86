#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BY"; reverted.) Lease BY (any card): attention's scores with two lanes per (head, position)
# (each dots half the K row's 16-byte chunks, two accumulator chains, and the halves meet by
# one shuffle) against the kernels before it (.device/prev.ron
# + v_prev.cu: `git show 95c5a08:backend/kernels/mkc.cu`), persistent and pdl in one process,
# alternated twice, then 4 split-KV parts at P32 (.device/kv4.ron) once each way, the GPU tests
# on the new build and `mkc probe attention` for both sources (.device/prevmodel.ron: the
# tuned model with the old source). On an H200: issue 18's bar (main, the same comparison)
# first, then `mkc probe latency` (docs/perf.md "Attention's scores, two lanes a
# score"). Also .device/: mkc, gpu_test.
LIMIT=300 ARCHIVE=by.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    b new_$r
    b prev_$r --tune .device/prev.ron
done
grep -q H200 $W/gpu.txt && probe_latency
T=.device/kv4.ron b kv4
T=.device/kv4.ron b kv4prev --tune .device/prev.ron
gpu_tests
for n in new prev; do
    [ $n = new ] && f=$T || f=.device/prevmodel.ron
    timeout 60 $M probe attention --model $f > $W/probe_att_$n.log 2>&1; echo "probe attention $n rc=$?"
    tail -12 $W/probe_att_$n.log; keep
done
