#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Fewer copies in flight while the consumers wait"): writes
to stdout a copy of backend/kernels/mkc.cu whose persistent producer, while its SM's consumers
wait on a counter and stage their activations (from thread 0's first poll to the body's
MARK_PREPARED point), keeps at most K weight pages in flight (K = 0: issues none), and streams
as main does otherwise. Lease G showed that every request added near a dependent round trip
costs time; this removes requests there instead: when most SMs wait at an edge, fewer copies
queue in front of the edge's release, poll and activation loads. The chain kernels are main's.

With a second argument `release`, the window opens at the end of the previous instruction,
before thread 0's release, so that the release's acknowledgement waits behind fewer copies too.

usage: python3 tools/variants/throttle_wait.py K [release] > v_throttle_K.cu
"""
import pathlib
import sys

k = int(sys.argv[1])
from_release = sys.argv[2:] == ["release"]
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    # The flag and its clearing point.
    ("typedef unsigned long long u64;\n",
     """typedef unsigned long long u64;
#ifdef MKC_PERSISTENT
// Set (thread 0) while the persistent consumers wait on a counter and stage their activations.
__shared__ int throttle_s;
__device__ __forceinline__ void throttle_clear() {
    if (threadIdx.x == 0) *(volatile int*)&throttle_s = 0;
}
#else
__device__ __forceinline__ void throttle_clear() {}
#endif
"""),
    ("""    consumers_sync();  // prepare's shared-memory writes before the dot products
    mark(MARK_PREPARED);
""",
     """    consumers_sync();  // prepare's shared-memory writes before the dot products
    mark(MARK_PREPARED);
    throttle_clear();
"""),
    ("""        if (base == 0) mark(MARK_PREPARED);""",
     """        if (base == 0) {
            mark(MARK_PREPARED);
            throttle_clear();
        }"""),
    # The producer: at most K pages in flight while the flag is set.
    ("__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr) {",
     "__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr,\n"
     "                       const volatile int* throttle = nullptr) {"),
    ("        if (lap > 0 && !mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left)) return i;\n",
     """        if (lap > 0 && !mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left)) return i;
        if (throttle && *throttle) {
            int held_slot = -1, held_lap = 0;
            if (%d > 0 && s.page0 + i >= %d) ring_slot(s, s.page0 + i - %d, held_slot, held_lap);
            for (;;) {
                if (!*throttle) break;
                if (left && *left) return i;
                if (held_slot >= 0) {
                    unsigned done;
                    asm volatile(
                        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%%1], %%2; selp.u32 %%0, 1, 0, p; }"
                        : "=r"(done)
                        : "r"(smem_addr(&s.full[held_slot])), "r"((unsigned)held_lap & 1)
                        : "memory");
                    if (done) break;
                } else if (%d > 0) {
                    break;  // fewer than K pages issued so far
                }
            }
        }
""" % (k, k, k, k)),
    ("        const int issued = produce(s, v, first, count, left);",
     "        const int issued = produce(s, v, first, count, left, &throttle_s);"),
    # Set by the poller, zeroed in the prologue.
    ("""    __device__ void wait() const {
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 0) {""",
     """    __device__ void wait() const {
#ifndef MKC_ABLATE_WAITS
        if (threadIdx.x == 0) {
            *(volatile int*)&throttle_s = 1;"""),
    ("""        left_s = 0;
        stop_s = 0;""",
     """        left_s = 0;
        stop_s = 0;
        throttle_s = 0;"""),
]
if from_release:
    edits.append((
        """        if (threadIdx.x == 0) {
            for (int k = 0; k < signals; ++k) {""",
        """        if (threadIdx.x == 0) {
            *(volatile int*)&throttle_s = 1;
            for (int k = 0; k < signals; ++k) {"""))
for old, new in edits:
    assert src.count(old) == 1, "mkc.cu moved: " + old[:70]
    src = src.replace(old, new)
sys.stdout.write(src)
