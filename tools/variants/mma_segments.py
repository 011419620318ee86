#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The page math on the tensor cores, by column subsets"):
writes to stdout a copy of backend/kernels/mkc.cu whose register page loop for 2,048-column
pages (page_dots with NJ = 8, R = 4: every Llama-3.2-1B matvec) runs on the tensor cores at full
precision with as many MMAs as lease AW's bf16-input `hi` mode: 32 `mma.sync.m16n8k16` per page.

One MMA covers all four rows and both parts of the input at once: A's 16 M-rows are the page's
4 rows times 4 column subsets, B's 8 columns the 4 subsets times the input's 2 parts (rounded to
bf16; what that rounding left), and D[m][n] is useful where m's subset is n's (32 of 128
entries). The k index within an MMA is a permutation A and B share, chosen so that lane l
reads row l / 8 at 16-byte chunk 8 j + l % 8 for k-step j (a warp's load: four rows' 128
contiguous bytes) and those 4 words are its A fragment as loaded: M-row g (= l / 4) takes the
chunk's columns 0, 1, 4, 5 and M-row g + 8 its columns 2, 3, 6, 7. The lane's B fragments (64
words per 2,048-column chunk, the register budget of today's 64 input floats) are loaded once
per chunk by load_x_dots. A CPU simulation of the fragments (mma_segments_check.py, beside
this script) matches the dot products to 1.2e-6.

usage: python3 tools/variants/mma_segments.py [ACC_SETS: 2, 4 (default) or 8] > v_seg.cu

ACC_SETS independent accumulator sets take the 32 MMAs in turn (chains of 32 / ACC_SETS).
"""
import pathlib
import sys

assert len(sys.argv) <= 2, __doc__
acc_sets = int(sys.argv[1]) if len(sys.argv) == 2 else 4
assert acc_sets in (2, 4, 8), __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

helpers = "#define ACC_SETS " + str(acc_sets) + """
// bf16x2 of (first, second): `first` in the low half, as two consecutive elements in memory.
__device__ __forceinline__ unsigned pack_bf16x2(float first, float second) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(second), "f"(first));
    return r;
}

// d += A B for one m16n8k16 tile (bf16 in, f32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The lane's B fragments of a 2,048-column input chunk (page_dots_mma), in xr's 64 words: for
// subset u = g / 2 and part h = g % 2 (the input rounded to bf16, or the residue), k-step j's
// words 2 j and 2 j + 1 hold columns c, c + 1 and c + 4, c + 5 (bf16x2), where
// c = 8 (8 j + 4 (u / 2) + t) + 2 (u % 2).
__device__ __forceinline__ void load_x_frag(float (&xr)[8][8], const float* x, int k, int chunk) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3, u = g >> 1, h = g & 1;
    const float* base = x + (long)chunk * k + 8 * (4 * (u >> 1) + t) + 2 * (u & 1);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#ifdef MKC_ABLATE_LOADS
        (void)base;
        const float f[4] = {1.0f / 64, 1.0f / 64, 1.0f / 64, 1.0f / 64};
#else
        const float2 a = *reinterpret_cast<const float2*>(base + 64 * j);
        const float2 b = *reinterpret_cast<const float2*>(base + 64 * j + 4);
        const float f[4] = {a.x, a.y, b.x, b.y};
#endif
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const unsigned hi = pack_bf16x2(f[2 * q], f[2 * q + 1]);
            const unsigned lo =
                pack_bf16x2(f[2 * q] - __uint_as_float(hi << 16), f[2 * q + 1] - __uint_as_float(hi & 0xFFFF0000u));
            xr[j / 4][2 * (j % 4) + q] = __uint_as_float(h ? lo : hi);
        }
    }
}

// load_x, or the B fragments where page_dots runs on the tensor cores (NJ = 8).
template <int NJ>
__device__ __forceinline__ void load_x_dots(float (&xr)[NJ][8], const float* x, int k, int chunk) {
    if constexpr (NJ == 8) load_x_frag(xr, x, k, chunk);
    else load_x<NJ>(xr, x, k, chunk);
}

// The four rows' dot products of a 2,048-column page with the input whose fragments xr holds
// (load_x_frag), on the tensor cores; every lane returns every row's full sum. Lane l reads row
// l / 8 at 16-byte chunk 8 j + l % 8 for k-step j (a warp's load: four rows' 128 contiguous
// bytes), and those words are its A fragment as loaded: M-row g (lane group g = l / 4) takes
// the chunk's columns 0, 1, 4, 5, M-row g + 8 its columns 2, 3, 6, 7. So row r's columns fall
// in four subsets (M-rows 2 r, 2 r + 8 of even chunks, 2 r + 1, 2 r + 9 of odd ones), the
// same for every row, and B's column n = 2 u + h is subset u of the input's part h: D[m][n]
// is useful where m's subset is u, in lanes 8 r + {0, 1, 6, 7}.
__device__ __forceinline__ void page_dots_mma(const bf16* page, const float (&xr)[8][8], float (&out)[4]) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const bf16* p = page + (lane >> 3) * 2048 + (lane & 7) * 8;
    float acc[ACC_SETS][4];
#pragma unroll
    for (int c = 0; c < ACC_SETS; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][e] = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const uint4 w = *reinterpret_cast<const uint4*>(p + 64 * j);
        mma_bf16(acc[j % ACC_SETS], w.x, w.y, w.z, w.w, __float_as_uint(xr[j / 4][2 * (j % 4)]),
                 __float_as_uint(xr[j / 4][2 * (j % 4) + 1]));
    }
    float d[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        d[e] = 0.f;
#pragma unroll
        for (int c = 0; c < ACC_SETS; ++c) d[e] += acc[c][e];
    }
    const int subset = 2 * (g & 1);  // M-row g's subset; M-row g + 8's is the next
    float y = (t == subset ? d[0] + d[1] : 0.f) + (t == subset + 1 ? d[2] + d[3] : 0.f);
#pragma unroll
    for (int off = 1; off < 8; off *= 2) y += __shfl_xor_sync(0xffffffffu, y, off);
#pragma unroll
    for (int r = 0; r < 4; ++r) out[r] = __shfl_sync(0xffffffffu, y, 8 * r);
}

// This lane's part of the dot products of the R rows of a page"""

edits = [
    ("// This lane's part of the dot products of the R rows of a page", helpers),
    ("""__device__ __forceinline__ void page_dots(const bf16* page, const float (&xr)[NJ][8], float (&out)[R]) {
    page_dots_partial<NJ, R, 256 * NJ>(page, xr, out);
#pragma unroll
    for (int r = 0; r < R; ++r) out[r] = warp_sum(out[r]);
}""",
     """__device__ __forceinline__ void page_dots(const bf16* page, const float (&xr)[NJ][8], float (&out)[R]) {
    if constexpr (NJ == 8 && R == 4) {
        page_dots_mma(page, xr, out);
    } else {
        page_dots_partial<NJ, R, 256 * NJ>(page, xr, out);
#pragma unroll
        for (int r = 0; r < R; ++r) out[r] = warp_sum(out[r]);
    }
}"""),
    ("            load_x<NX>(xr, x, v.k, chunk);", "            load_x_dots<NX>(xr, x, v.k, chunk);"),
    ("        load_x<NX>(xr, x, 0, 0);\n        if (tree_total", "        load_x_dots<NX>(xr, x, 0, 0);\n        if (tree_total"),
    ("    if (!BLOCKED && x_in_span) load_x<NX>(xr, x, 0, 0);", "    if (!BLOCKED && x_in_span) load_x_dots<NX>(xr, x, 0, 0);"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
