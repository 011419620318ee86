#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The producer's next descriptors ahead"): writes to stdout a
copy of backend/kernels/mkc.cu whose persistent producer reads each instruction's descriptor
two instructions ahead and prefetches the next instruction's layer into L1, so that crossing an
instruction boundary costs it no dependent global load. Main's producer loads `p.instrs[i]` and
then reads the fields of `p.layers[ins.layer]` as it reaches instruction i: a new layer (every
~5 instructions) is an L2 round trip, a new 128-byte line of descriptors (every 4) another,
before its first page can be issued. Lease BG's last rung (every kind of work removed: 238-242
µs on an H100, the model 49.5) is where that would show first. The chain kernels are main's.

usage: python3 tools/variants/producer_ahead.py > v_producer_ahead.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("    int page0 = 0, kvs = 0;\n"
     "    bool go = true;\n"
     "    for (int i = begin; go && i < end; ++i) {\n"
     "        const Instr ins = p.instrs[i];\n"
     "        const Layer& L = p.layers[ins.layer];\n",
     "    int page0 = 0, kvs = 0;\n"
     "    bool go = true;\n"
     "    // Instruction i's descriptor, i + 1's and i + 2's (loaded one iteration before it is\n"
     "    // read), and i + 1's layer prefetched into L1 (variant).\n"
     "    Instr ins, nxt, after;\n"
     "    if (begin < end) ins = p.instrs[begin];\n"
     "    nxt = begin + 1 < end ? p.instrs[begin + 1] : ins;\n"
     "    for (int i = begin; go && i < end; ++i, ins = nxt, nxt = after) {\n"
     "        after = i + 2 < end ? p.instrs[i + 2] : nxt;\n"
     "        if (i + 1 < end) {\n"
     "            const char* next_layer = (const char*)(p.layers + nxt.layer);\n"
     "            asm volatile(\"prefetch.global.L1 [%0];\" ::\"l\"(next_layer));\n"
     "            asm volatile(\"prefetch.global.L1 [%0];\" ::\"l\"(next_layer + sizeof(Layer) - 1));\n"
     "        }\n"
     "        const Layer& L = p.layers[ins.layer];\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
