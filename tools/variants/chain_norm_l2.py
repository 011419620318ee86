#!/usr/bin/env python3
"""Variant: the chain kernels read their RMSNorm weights from global memory (L2) as the
persistent kernel does, in the batch of the residual's loads, instead of the producer's copy
into shared memory (docs/perf.md, "An eleventh ring slot"). Writes the changed mkc.cu to stdout."""
import pathlib, sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()


def rep(old, new):
    global src
    if src.count(old) != 1:
        sys.exit(f"chain_norm_l2.py: expected one {old!r}")
    src = src.replace(old, new)


rep("""__device__ __forceinline__ Stream ChainWork::stream(int x_len, const bf16*, int norm_len, int slots) const {
    return carve_stream(x_len, norm_len, slots);""",
    """__device__ __forceinline__ Stream ChainWork::stream(int x_len, const bf16* norm, int norm_len, int slots) const {
    Stream s = carve_stream(x_len, norm_len, slots);
    s.norm = norm;
    s.norm_bar = nullptr;
    return s;""")
rep("""    mbar_init(s.norm_bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");""",
    """    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");""")
rep("""        ring_init(s);
        if (norm) {""", """        ring_init(s);
        if (false) {""")
sys.stdout.write(src)
