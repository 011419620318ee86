#!/usr/bin/env python3
"""Variant (an ablation, docs/perf.md "Lease AS"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent instructions of one operator kind skip their counter
waits. The step computes wrong numbers (its checks fail); only its time means anything.

Why: the attention -> O-projection fold (every O task computes its KV group's attention
itself, so that no counter lies between them) removes that edge's release, poll and wait for
the slowest attention unit. With `o_proj`, the O-projection runs as soon as its SM reaches it:
the 32 SMs that run attention still run it before their O task, the other 100 do not wait.
That is the fold's gain with a one-head attention and no extra partial sums: its upper bound.
With `attention`, attention does not wait for QKV: what the QKV -> attention edge costs.

usage: python3 tools/variants/edge_free.py o_proj|attention > v_free.cu
"""
import pathlib
import sys

kinds = {"o_proj": "OP_O_PROJ", "attention": "OP_ATTENTION"}
assert len(sys.argv) == 2 and sys.argv[1] in kinds, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = "            for (int i = 0; i < ins.waits && !*stop; ++i) {\n"
new = f"            for (int i = 0; i < ins.waits && !*stop && ins.op != {kinds[sys.argv[1]]}; ++i) {{  // variant\n"
assert src.count(old) == 1, old
sys.stdout.write(src.replace(old, new))
