#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "The tensor-core page loop where the input is staged"):
writes to stdout a copy of backend/kernels/mkc.cu in which the operators that stage their input
in shared memory (QKV, up/gate, the LM head: `INPUT_STAGED`) run their 2,048-column pages (NJ =
8) on the tensor cores. The page loop is lease AZ's column-subset MMA: 32 `mma.sync.m16n8k16`
per page, with every weight times the input's bf16 rounding and its residue in one MMA. The
input's B fragments are built once per CTA, not once per warp. After `prepare` has staged the
input (floats), the consumer threads rewrite it in place as bf16 parts in the fragments' order
(`fragment_staged_input`: ~10 values per thread, two barriers), and each warp then loads its 64
fragment words with 16 conflict-free 16-byte loads. Lease AZ had each warp build them itself:
~400 instructions per lane between the input's arrival and the first MMA, which ate the loop's
gain. The O-projection and down (input from L2) and every other page shape keep main's FMA
loop.

Fragment layout: word 4 (32 jp + l) + w of a 2,048-column chunk is lane l's B word for k-step
2 jp + w / 2, register w % 2. Lane l = 4 g + t takes subset u = g / 2 of part h = g % 2 at
columns c, c + 1 (register 0) and c + 4, c + 5 (register 1), c = 64 j + 8 (4 (u / 2) + t) +
2 (u % 2), so that each page load's 4 words are its A fragment as loaded (lane l: row l / 8,
16-byte chunk 8 j + l % 8).

usage: python3 tools/variants/mma_staged.py > v_staged.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

helpers = """// bf16x2 of (first, second): `first` in the low half, as two consecutive elements in memory.
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

// The fragment word (within its 2,048-column chunk) that holds part h of column pair (c, c + 1),
// c even: the inverse of the layout above.
__device__ __forceinline__ int frag_word(int c, int h) {
    const int j = c >> 6, chunk8 = (c >> 3) & 7, r = c & 7;
    const int t = chunk8 & 3, u = 2 * (chunk8 >> 2) + ((r >> 1) & 1), b = r >> 2;
    const int lane = 4 * (2 * u + h) + t;
    return ((j >> 1) * 32 + lane) * 4 + 2 * (j & 1) + b;
}

// Rewrites the staged input (n floats at x, n a multiple of 2,048; the consumer threads) in
// place as the B fragments of page_dots_mma: each 2,048-column chunk's 4,096 bf16 parts in its
// 8 KiB. Begins and ends with the consumers' barrier (every float read before any word lands;
// every word landed before a warp loads its fragments).
__device__ void fragment_staged_input(float* x, int n) {
    constexpr int G = (HIDDEN + 4 * CONSUMER_THREADS - 1) / (4 * CONSUMER_THREADS);  // float4s per thread
    float4 v[G];
#pragma unroll
    for (int q = 0; q < G; ++q) {
        const int at = (threadIdx.x + q * CONSUMER_THREADS) * 4;
        if (at < n) v[q] = *reinterpret_cast<const float4*>(x + at);
    }
    consumers_sync();
    unsigned* words = reinterpret_cast<unsigned*>(x);
#pragma unroll
    for (int q = 0; q < G; ++q) {
        const int at = (threadIdx.x + q * CONSUMER_THREADS) * 4;
        if (at >= n) continue;
        unsigned* chunk = words + (at & ~2047);
        const int c = at & 2047;
        const float f[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const unsigned hi = pack_bf16x2(f[2 * p], f[2 * p + 1]);
            const unsigned lo =
                pack_bf16x2(f[2 * p] - __uint_as_float(hi << 16), f[2 * p + 1] - __uint_as_float(hi & 0xFFFF0000u));
            chunk[frag_word(c + 2 * p, 0)] = hi;
            chunk[frag_word(c + 2 * p, 1)] = lo;
        }
    }
    consumers_sync();
}

// The lane's 64 fragment words of chunk `chunk` (row stride k floats: the chunk starts at
// x + chunk * k) from the staged fragments, into xr's words.
__device__ __forceinline__ void load_staged_frag(float (&xr)[8][8], const float* x, int k, int chunk) {
    const uint4* p = reinterpret_cast<const uint4*>(x + (long)chunk * k) + threadIdx.x % 32;
#pragma unroll
    for (int jp = 0; jp < 16; ++jp) {
        const uint4 w = p[32 * jp];
        xr[jp / 2][4 * (jp % 2) + 0] = __uint_as_float(w.x);
        xr[jp / 2][4 * (jp % 2) + 1] = __uint_as_float(w.y);
        xr[jp / 2][4 * (jp % 2) + 2] = __uint_as_float(w.z);
        xr[jp / 2][4 * (jp % 2) + 3] = __uint_as_float(w.w);
    }
}

// The four rows' dot products of a 2,048-column page with the input whose fragments xr holds,
// on the tensor cores; every lane returns every row's full sum. Lane l reads row l / 8 at
// 16-byte chunk 8 j + l % 8 for k-step j; M-row g takes the chunk's columns 0, 1, 4, 5, M-row
// g + 8 its columns 2, 3, 6, 7, so row r's columns fall in four subsets and B's column
// n = 2 u + h is subset u of part h: D[m][n] is useful where m's subset is u, in lanes
// 8 r + {0, 1, 6, 7}.
__device__ __forceinline__ void page_dots_mma(const bf16* page, const float (&xr)[8][8], float (&out)[4]) {
    const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const bf16* p = page + (lane >> 3) * 2048 + (lane & 7) * 8;
    float acc[4][4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][e] = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const uint4 w = *reinterpret_cast<const uint4*>(p + 64 * j);
        mma_bf16(acc[j % 4], w.x, w.y, w.z, w.w, __float_as_uint(xr[j / 4][2 * (j % 4)]),
                 __float_as_uint(xr[j / 4][2 * (j % 4) + 1]));
    }
    float d[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) d[e] = (acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e]);
    const int subset = 2 * (g & 1);  // M-row g's subset; M-row g + 8's is the next
    float y = (t == subset ? d[0] + d[1] : 0.f) + (t == subset + 1 ? d[2] + d[3] : 0.f);
#pragma unroll
    for (int off = 1; off < 8; off *= 2) y += __shfl_xor_sync(0xffffffffu, y, off);
#pragma unroll
    for (int r = 0; r < 4; ++r) out[r] = __shfl_sync(0xffffffffu, y, 8 * r);
}

// Consumer warp: computes its pages"""

edits = [
    ("// Consumer warp: computes its pages", helpers),
    ("template <int NJ, typename Epilogue>\n__device__ void consume(",
     "template <int NJ, bool FRAG = false, typename Epilogue>\n__device__ void consume("),
    ("            load_x<NX>(xr, x, v.k, chunk);",
     "            if constexpr (FRAG) load_staged_frag(xr, x, v.k, chunk);\n            else load_x<NX>(xr, x, v.k, chunk);"),
    ("        else page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);",
     "        else if constexpr (FRAG) page_dots_mma(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);\n        else page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);"),
    ("    consumers_sync();  // prepare's shared-memory writes before the dot products\n",
     "    consumers_sync();  // prepare's shared-memory writes before the dot products\n"
     "    if constexpr (NJ == 8 && !X_GLOBAL) fragment_staged_input(s.x, x_len);\n"),
    ("    else consume<NJ>(s, v, s.x, first, count, epilogue);",
     "    else consume<NJ, NJ == 8>(s, v, s.x, first, count, epilogue);"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
