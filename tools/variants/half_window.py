#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Half a page in the window"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer, for a page it issues while the boundary
window is open, copies the page's first half on a barrier of its own, waits for it, and only
then copies the second half on the slot's barrier (arriving on it after the first half landed,
so that the consumers' wait covers both halves): with the window's limit of one page
(`persistent_boundary_inflight: 1`, the profiles'), at most half a page is in flight per SM
in the window. The window's depth is bracketed by K = 0 (+19 µs, lease H), K = 1 (main) and
K = 2 (+18, lease AV); this is the depth between 0 and 1. Outside the window and in the chain
kernels nothing changes.

usage: python3 tools/variants/half_window.py > v_half.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("""__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr,
                       const volatile int* boundary = nullptr, int held = 0, int cap = 0) {""",
     """__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr,
                       const volatile int* boundary = nullptr, int held = 0, int cap = 0, u64* half_bar = nullptr,
                       unsigned* half_uses = nullptr) {"""),
    ("""        bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
        mbar_expect_tx(&s.full[slot], bytes);
        // One copy per page""",
     """        bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
        if (half_bar && *boundary) {
            // In the window: the first half on half_bar, waited, then the second on the slot's
            // barrier (variant).
            const unsigned half = bytes / 2;
            const bf16* src0 = page_source(v, first + i, 0);
            const bf16* src1 = v.page_out != v.page_rows ? page_source(v, first + i, 1) : src0 + half / 2;
            mbar_expect_tx(half_bar, half);
            bulk_copy_hinted(dst, src0, half, half_bar, policy);
            mbar_wait(half_bar, (*half_uses)++ & 1);
            mbar_expect_tx(&s.full[slot], half);
            bulk_copy_hinted(dst + half / 2, src1, half, &s.full[slot], policy);
            continue;
        }
        mbar_expect_tx(&s.full[slot], bytes);
        // One copy per page"""),
    ("""__device__ void persistent_producer(const Model& m, const Globals& g, const Persistent& p, int begin, int end,
                                    const volatile int* left, const volatile int* boundary) {""",
     """__device__ void persistent_producer(const Model& m, const Globals& g, const Persistent& p, int begin, int end,
                                    const volatile int* left, const volatile int* boundary, u64* half_bar,
                                    unsigned* half_uses) {"""),
    ("""        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT,
                                   PERSISTENT_STREAM_INFLIGHT);""",
     """        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT,
                                   PERSISTENT_STREAM_INFLIGHT, boundary ? half_bar : nullptr, half_uses);"""),
    ("""    __shared__ int boundary_s;   // the consumers are between two instructions (CounterDeps)""",
     """    __shared__ int boundary_s;   // the consumers are between two instructions (CounterDeps)
    __shared__ u64 half_bar_s;   // the first halves of the window's pages (variant)
    __shared__ unsigned half_uses_s;"""),
    ("""        mbar_init(persistent_kv_free(), 1);""",
     """        mbar_init(persistent_kv_free(), 1);
        mbar_init(&half_bar_s, 1);
        half_uses_s = 0;"""),
    ("""            persistent_producer(m, g, p, begin, end, &left_s,
                                PERSISTENT_BOUNDARY_INFLIGHT < PERSISTENT_SLOTS ||
                                        PERSISTENT_STREAM_INFLIGHT < PERSISTENT_SLOTS
                                    ? &boundary_s
                                    : nullptr);""",
     """            persistent_producer(m, g, p, begin, end, &left_s,
                                PERSISTENT_BOUNDARY_INFLIGHT < PERSISTENT_SLOTS ||
                                        PERSISTENT_STREAM_INFLIGHT < PERSISTENT_SLOTS
                                    ? &boundary_s
                                    : nullptr,
                                &half_bar_s, &half_uses_s);"""),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
