#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The release beside the next poll"): writes to stdout a
copy of backend/kernels/mkc.cu in which k_persistent's thread 0 issues an instruction's
signals (`red.release.gpu`) after the loop-end barrier instead of before it, and thread 32
polls the next instruction's counters, so that the release's wait for the stores'
acknowledgement and the next instruction's poll run at once instead of one after the other.
The signals' refs are copied to shared memory before the barrier (thread 32 overwrites the
staged refs for a later instruction meanwhile). The chain kernels are main's.

usage: python3 tools/variants/late_release.py > v_late_release.cu
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    # The poller: thread 32 (warp 1) instead of thread 0.
    ("""    __device__ void wait() const {
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 0) {""",
     """    __device__ void wait() const {
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 32) {"""),
    ("""        const bool stop = consumers_sync_or(threadIdx.x == 0 && stop_s);""",
     """        const bool stop = consumers_sync_or(threadIdx.x == 32 && stop_s);"""),
    # A shared copy of the finished instruction's signals.
    ("""    __shared__ int left_s;       // the consumers have left the loop
""",
     """    __shared__ int left_s;       // the consumers have left the loop
    __shared__ CounterRef sig_s[PERSISTENT_MAX_REFS];  // the finished instruction's signals
"""),
    # Thread 0 keeps the signals for after the barrier.
    ("""        if (threadIdx.x == 0) {
            for (int k = 0; k < signals; ++k) {
                const CounterRef s = refs_s[i % 2][waits + k];
                asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p.counters + s.counter), "r"((unsigned)s.amount)
                             : "memory");
            }""",
     """        if (threadIdx.x == 0) {
            for (int k = 0; k < signals; ++k) sig_s[k] = refs_s[i % 2][waits + k];"""),
    ("""        trace_end();
        if (stop) break;""",
     """        trace_end();
        if (stop) {
            if (threadIdx.x == 0)
                for (int k = 0; k < signals; ++k)
                    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p.counters + sig_s[k].counter),
                                 "r"((unsigned)sig_s[k].amount)
                                 : "memory");
            break;
        }"""),
    ("""            else if (t >= IW && t < IW + LW) ((unsigned*)&L)[t - IW] = ((const unsigned*)&next_L)[t - IW];
        }
        consumers_sync();
    }""",
     """            else if (t >= IW && t < IW + LW) ((unsigned*)&L)[t - IW] = ((const unsigned*)&next_L)[t - IW];
        }
        consumers_sync();
        // The signals, while thread 32 polls the next instruction's counters.
        if (threadIdx.x == 0)
            for (int k = 0; k < signals; ++k)
                asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p.counters + sig_s[k].counter),
                             "r"((unsigned)sig_s[k].amount)
                             : "memory");
    }"""),
]
for old, new in edits:
    assert src.count(old) == 1, "k_persistent moved: " + old[:70]
    src = src.replace(old, new)
sys.stdout.write(src)
