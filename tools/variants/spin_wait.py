#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The ring's page handshake"): writes to stdout a copy of
backend/kernels/mkc.cu whose `mbar_wait` (the consumers' wait for a landed page, attention's
wait for its KV history, the producer's final waits) spins on `mbarrier.test_wait`, which
never suspends the thread, where main loops on `try_wait`, which may suspend it until the phase
completes or a time limit passes. Lease BI's trace of the ladder's last rung (no copy, no math,
no loads) put ~0.75 us on each page a consumer warp takes: either the single producer thread's
loop or the waiting warps' wake-up. If the rung falls a lot with spinning, the wake-up is it.

usage: python3 tools/variants/spin_wait.py > v_spin.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {\n"
     "    while (!mbar_try(bar, parity)) {\n"
     "    }\n"
     "}\n",
     "__device__ __forceinline__ void mbar_wait(u64* bar, unsigned parity) {\n"
     "    // Variant: spin on test_wait (never suspends the thread).\n"
     "    for (;;) {\n"
     "        unsigned done;\n"
     "        asm volatile(\"{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\"\n"
     "                     : \"=r\"(done)\n"
     "                     : \"r\"(smem_addr(bar)), \"r\"(parity)\n"
     "                     : \"memory\");\n"
     "        if (done) return;\n"
     "    }\n"
     "}\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
