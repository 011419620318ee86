#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The tensor-core loop for the O-projection and down"):
writes to stdout a copy of backend/kernels/mkc.cu in which the O-projection and down, which read
their input from L2 inside the page loop, run their 4-row, 2,048-column pages on the tensor
cores too. Their producers write that input in the fragments' order: attention its output, and
up/gate's epilogue h, each value as two bf16 halfwords, its rounding and its residue, at the
positions `fragment_word` gives. The 8 KiB of a 2,048-column chunk's fragments take the place
of its 2,048 floats. Each consumer warp then loads its 64 fragment words with 16 16-byte loads
from L2, as main's FMA loop loads its 64 floats, and no warp converts anything. Lease AZ built
the fragments per warp after the wait and lost. Only where the O-projection (down) reads
attention's output (h) from L2 with such pages: elsewhere the producers write floats as before.

A kernels_cu variant: the bench's checks (the logits against the CPU reference, the same
tokens) see the change, but the backend's operator GPU tests read and write those buffers as
floats, so they do not apply to it.

usage: python3 tools/variants/mma_l2_inputs.py > v_l2.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

helper = """// Stores input value `v` of column c as its two fragment halfwords (its bf16 rounding and the
// residue) into the fragments of an input vector at x (2,048 words per chunk).
__device__ __forceinline__ void store_fragment_value(float* x, int c, float v) {
    unsigned short* halves = reinterpret_cast<unsigned short*>(x + (c & ~2047));
    const int cc = c & 2047;
    const unsigned hi = pack_bf16x2(v, 0.f) & 0xFFFFu;
    const unsigned lo = pack_bf16x2(v - __uint_as_float(hi << 16), 0.f) & 0xFFFFu;
    halves[2 * fragment_word(cc & ~1, 0) + (cc & 1)] = (unsigned short)hi;
    halves[2 * fragment_word(cc & ~1, 1) + (cc & 1)] = (unsigned short)lo;
}

// Whether the O-projection's (down's) input is stored as fragments: read from L2 in pages of 4
// rows of 2,048 columns.
#define ATTN_FRAGMENTS (X_LEN_O_PROJ == 0 && K_GROUPS_O_PROJ == TENSOR_CORE_K_GROUPS && PAGE_BYTES == TENSOR_CORE_PAGE_BYTES)
#define H_FRAGMENTS (X_LEN_DOWN == 0 && K_GROUPS_DOWN == TENSOR_CORE_K_GROUPS && PAGE_BYTES == TENSOR_CORE_PAGE_BYTES)

// The lane's 64 fragment words of input chunk"""

edits = [
    ("// The lane's 64 fragment words of input chunk", helper),
    ("""    constexpr bool MMA = NJ == TENSOR_CORE_K_GROUPS && PAGE_BYTES == TENSOR_CORE_PAGE_BYTES && !X_GLOBAL;
    if constexpr (MMA) stage_fragments(s.x, x_len);""",
     """    constexpr bool MMA = NJ == TENSOR_CORE_K_GROUPS && PAGE_BYTES == TENSOR_CORE_PAGE_BYTES;
    if constexpr (MMA && !X_GLOBAL) stage_fragments(s.x, x_len);"""),
    ("    if (X_GLOBAL) consume<NJ, false>(s, v, x_global, first, count, epilogue);",
     "    if (X_GLOBAL) consume<NJ, MMA>(s, v, x_global, first, count, epilogue);"),
    ("            L.h[row0 + lane] = gt / (1.f + __expf(-gt)) * up;",
     """            const float h = gt / (1.f + __expf(-gt)) * up;
            if (H_FRAGMENTS) store_fragment_value(L.h, row0 + lane, h);
            else L.h[row0 + lane] = h;"""),
    ("        L.attn[qh0 * hd + idx] = sum;",
     """        if (ATTN_FRAGMENTS) store_fragment_value(L.attn, qh0 * hd + idx, sum);
        else L.attn[qh0 * hd + idx] = sum;"""),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
