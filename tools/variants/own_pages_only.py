#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AO"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer streams at the ring's full depth only the
pages of the instruction its consumers are running, once its inputs are staged; any page of a
later instruction is issued under the boundary hold (at most K in flight), as main issues
pages inside the window.

Why: lease AN's marks put an instruction's end barrier → signals (thread 0's
`red.release.gpu` after the stores) at 2.3-3.3 µs for up/gate, 1.7-2.3 for down, 1.0-1.3 for
QKV and the O-projection, 0.5 for attention (H100, held). In main the hold starts at the end
barrier, when each SM's ring already has the next instruction's pages in flight at full depth,
and `mkc probe latency` puts a release after a store at 1.2-3.7 µs beside 4-8 copies per SM
against 0.36 beside one. Here the hold starts once an instruction's own pages are all issued.
The cost is the next instruction's prefetch, issued at K instead of full depth during the
current one's tail.

How: the consumers' thread 0 and the producer lane each write the index of the instruction
they are at into shared memory; a page is held while the window is open (main's rule) or the
two differ.

usage: python3 tools/variants/own_pages_only.py > v_own.cu
"""
import pathlib
import sys

assert len(sys.argv) == 1, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
FLAGS = r'''// variant: the instruction the consumers run ([0]) and the producer issues ([1]).
__device__ __forceinline__ volatile int* ins_at() {
    __shared__ int at[2];
    return at;
}
// Whether the producer holds its next page: the window is open, or the page is a later
// instruction's than the consumers run.
__device__ __forceinline__ bool held_now(const volatile int* boundary) {
    return *boundary || ins_at()[0] != ins_at()[1];
}

'''
edits = [
    ("// Waits, before the producer issues ring page q while `*boundary` is set,",
     FLAGS + "// Waits, before the producer issues ring page q while `*boundary` is set,"),
    ("    while (*boundary) {\n", "    while (held_now(boundary)) {\n"),
    ("        if (boundary && *boundary && !throttled_issue(s, s.page0 + i, held, boundary, left)) return i;\n",
     "        if (boundary && held_now(boundary) && !throttled_issue(s, s.page0 + i, held, boundary, left)) return i;\n"),
    ("        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT);\n",
     "        ins_at()[1] = i;\n        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT);\n"),
    ("        const PersistentWork w{ins.first, ins.count, page0_s, -1};\n",
     "        if (threadIdx.x == 0) ins_at()[0] = i;\n        const PersistentWork w{ins.first, ins.count, page0_s, -1};\n"),
    ("        boundary_s = 0;\n        if (begin < end) {\n",
     "        boundary_s = 0;\n        ins_at()[0] = ins_at()[1] = begin;\n        if (begin < end) {\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
