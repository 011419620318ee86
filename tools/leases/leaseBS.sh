#!/bin/bash
# (Run 2026-12-07 on an H100: docs/perf.md "Lease BS".) Lease BS (any card): staged inputs written as fragments in one pass
# (stage_sum writes the tensor cores' fragments from its registers: QKV, up/gate and the LM
# head skip stage_fragments' pass and two barriers) against HEAD 0719d0f's kernels
# (.device/old.ron + v_old.cu: `git show 0719d0f:backend/kernels/mkc.cu`), persistent and pdl
# in one process, alternated twice (docs/perf.md "Staged inputs as fragments in one pass").
# Then the GPU tests on the new build, 2 split-KV parts checked (.device/kv2.ron), and on an
# H200 `mkc probe latency` and a traced step; on another card a traced step. Also .device/:
# mkc, gpu_test.
LIMIT=420 ARCHIVE=bs.tgz
source tools/leases/common.sh
export TARGETS=persistent,pdl
for r in a b; do
    b new_$r
    b old_$r --tune .device/old.ron
done
gpu_tests
T=.device/kv2.ron b kv2
grep -q H200 $W/gpu.txt && probe_latency
traced new
