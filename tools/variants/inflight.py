#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "An in-flight cap on the H100"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer keeps at most K weight pages in flight (ring
page q is issued once page q - K has landed; the slot of page q - K is not refilled before
then, so its full barrier's phase is still the one awaited). The chain kernels are main's.
The twenty-first session's `tuning.persistent_inflight` (commit 40f50d5) as a kernels_cu copy.

usage: python3 tools/variants/inflight.py K > v_inflight_K.cu
"""
import pathlib
import sys

k = int(sys.argv[1])
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old_sig = "__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr) {"
new_sig = ("__device__ int produce(const Stream& s, const Matvec& v, int first, int count, const volatile int* left = nullptr,\n"
           "                       int inflight = 0) {")
old_wait = "        if (lap > 0 && !mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left)) return i;\n"
new_wait = old_wait + """        if (inflight > 0 && s.page0 + i >= inflight) {
            int landed_slot, landed_lap;
            ring_slot(s, s.page0 + i - inflight, landed_slot, landed_lap);
            mbar_wait(&s.full[landed_slot], landed_lap & 1);
        }
"""
old_call = "        const int issued = produce(s, v, first, count, left);"
new_call = f"        const int issued = produce(s, v, first, count, left, {k} < PERSISTENT_SLOTS ? {k} : 0);"
for old, new in ((old_sig, new_sig), (old_wait, new_wait), (old_call, new_call)):
    assert src.count(old) == 1, "the producer moved: " + old[:60]
    src = src.replace(old, new)
sys.stdout.write(src)
