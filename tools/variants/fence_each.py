#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Every consumer warp fences its own stores"): writes to
stdout a copy of backend/kernels/mkc.cu in which every consumer thread of k_persistent issues a
GPU-scope fence right after its part of an instruction, before the end barrier, so that each
warp's wait for its stores' acknowledgement overlaps the slower warps' work and thread 0's
release after the barrier finds nothing left to wait for. Adds fences only: as correct as main.
Run it through `tuning.kernels_cu`.

usage: python3 tools/variants/fence_each.py > v_fence_each.cu
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
old = "        const bool stop = consumers_sync_or(threadIdx.x == 0 && stop_s);\n"
assert src.count(old) == 1, "k_persistent's end barrier moved"
src = src.replace(old, '        asm volatile("fence.acq_rel.gpu;" ::: "memory");\n' + old)
sys.stdout.write(src)
