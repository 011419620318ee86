#!/usr/bin/env python3
"""Variant (measurement only, docs/perf.md "Lease AN"): writes to stdout a copy of
backend/kernels/mkc.cu whose trace marks split the end of each persistent instruction, for a
`--timeline` step. Three marks change meaning:
- attention's `sub1`: its output loop done (each thread's partial sums in registers; main:
  its scores done);
- attention's `sub2`: its output stored to global memory, before the end barrier (main: its
  first head's softmax done);
- every instruction's `landed`: the consumers' end barrier passed, just before thread 0's
  signals (main: warp 0's first page landed).
So, for attention, softmax → sub1 is the output loop, sub1 → sub2 the sum through shared memory
and the store, sub2 → landed the end barrier (and the staging wait), landed → end the
signals' release. Not for timing untraced steps: the marks are the only change, but the
machine code is not main's.

usage: python3 tools/variants/end_marks.py > v_marks.cu
"""
import pathlib
import sys

assert len(sys.argv) == 1, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    ("    body_sync<Work>();\n    mark(MARK_SUB1);\n    softmax_rows(",
     "    body_sync<Work>();\n    softmax_rows("),
    ("ATT_HEAD_RECORDS);\n    mark(MARK_SUB2);  // softmax of warp 0's head done\n",
     "ATT_HEAD_RECORDS);\n"),
    ("    body_sync<Work>();\n    // Every staged row, q and the scores are consumed:",
     "    mark(MARK_SUB1);  // variant: the output loop done\n    body_sync<Work>();\n    // Every staged row, q and the scores are consumed:"),
    ("        else L.attn[qh0 * hd + idx] = sum;\n    }\n}\n",
     "        else L.attn[qh0 * hd + idx] = sum;\n    }\n    mark(MARK_SUB2);  // variant: the output stored\n}\n"),
    ("        const bool stop = consumers_sync_or(threadIdx.x == 0 && stop_s);\n",
     "        const bool stop = consumers_sync_or(threadIdx.x == 0 && stop_s);\n        mark(MARK_LANDED);  // variant: the end barrier passed\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
