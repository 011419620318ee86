#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AM"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer stays held through some short instructions.

Main holds the producer (at most K copies in flight, the profile's K = 1) from an
instruction's end barrier until the next one's inputs are staged (CounterDeps::prepared), then
streams at the ring's full depth while the instruction computes. An attention instruction has
no pages of its own, so during its ~3 µs of compute its SM's producer issues up/gate pages at
full depth, and they are still in flight when attention's thread 0 releases its signal:
`mkc probe latency` put a release after a store at 0.36 µs beside one copy per SM and
1.2-3.7 µs beside 4-8 on its own SM. Attention's output → end was 1.8 µs in lease AK's H100
trace. Here the window stays open through the instructions MODE names: their
inputs staged do not clear the hold, so they release beside at most K copies.

Modes: `attention`; `o` (the O-projection: 4 landed pages per SM, then its release ends the
layer's attention chain); `short` (QKV, attention and the O-projection). The chain kernels
are main's (their prepared() does nothing).

usage: python3 tools/variants/held_through.py attention|o|short > v_held.cu
"""
import pathlib
import sys

modes = {
    "attention": "ins.op != OP_ATTENTION",
    "o": "ins.op != OP_O_PROJ",
    "short": "ins.op != OP_ATTENTION && ins.op != OP_O_PROJ && ins.op != OP_QKV_ROPE",
}
assert len(sys.argv) == 2 and sys.argv[1] in modes, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = "    __device__ __forceinline__ void prepared() const {\n        if (threadIdx.x == 0) *(volatile int*)boundary = 0;\n    }\n"
new = ("    __device__ __forceinline__ void prepared() const {  // variant: held through some instructions\n"
       f"        if (threadIdx.x == 0 && {modes[sys.argv[1]]}) *(volatile int*)boundary = 0;\n    }}\n")
assert src.count(old) == 1, old
sys.stdout.write(src.replace(old, new))
