#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AS"): writes to stdout a copy of
backend/kernels/mkc.cu whose attention body shares each K and V read between the query heads
of a task (a KV head's group), for both the chain and the persistent kernel.

Main's body computes one score per (head, position) thread, so a task of 4 query heads reads
every K row 4 times, and one output per (head, dimension, slice) thread, so it reads every V
element 4 times and each thread sums up to 4x the positions. The attention → O fold needs a
task of 4-8 heads to cost little more than one (docs/perf.md, "where next" after the
thirty-first session).

Here:
- Scores: one thread per position. It reads its K row once, 16 bytes at a time from a rotated
  start (as main's `k_row_dot`: conflict-free for consecutive rows), and dots each 16-byte chunk
  with up to 4 query heads at once (q from shared memory: one address per warp, a broadcast);
  heads past 4 in further groups of 4.
- Output: one thread per (dimension, slice of positions), slices = threads / head_dim (fewer
  if the region could not hold their partial sums). It reads V[pos][d] once per position for
  the task's heads, four positions at a time (p[h][pos]: one address per warp, a broadcast);
  the slices are added through shared memory as main adds them. At most 4 heads per task (a
  task of more traps: never a silently wrong output).
At one head per task (the tuned layout) the work is main's, in another loop order.

usage: python3 tools/variants/gqa_body.py > v_gqa.cu
"""
import pathlib
import sys

assert len(sys.argv) == 1, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

SCORES_OLD = '''        // One thread per (head, position): a warp shares the head and takes consecutive
        // positions, each starting its row at another 16-byte chunk (conflict-free).
        int c = end - base;
        for (int idx = tid; idx < hp * c; idx += NT) {
            int h = idx / c, i = idx % c;
            scores[h * len + base + i] = k_row_dot(kbuf + (long)i * hd, q + h * hd, hd, i) * scale;
        }
'''
SCORES_NEW = '''        // variant: one thread per position, its K row read once for up to 4 heads at a time.
        int c = end - base;
        for (int i = tid; i < c; i += NT)
            for (int h0 = 0; h0 < hp; h0 += 4)
                k_row_dots4(kbuf + (long)i * hd, q, hd, i, h0, hp, scores + base + i, len, scale);
'''

OUTPUT_START = '''    // Output: thread (h, d, slice) sums p[h][pos] * V[pos][d] over the positions of its slice'''
OUTPUT_END = '''        L.attn[qh0 * hd + idx] = sum;
    }
}
'''
OUTPUT_NEW = '''    // variant: thread (d, slice) sums p[h][pos] * V[pos][d] for the task's heads (at most 4:
    // llama's groups) over the positions of its slice (pos = slice mod slices), reading each V
    // element once, four positions at a time (four accumulator chains per head, as main has);
    // the slices are added through shared memory at the end, as many as the region holds.
    if (hp > 4) __trap();  // the variant's bound: never a silently wrong output
    const int slices = max(1, min(NT / hd, (int)(smem_bytes / (4u * hp * hd))));
    const int d = tid % hd, slice = tid / hd;
    const bool active = slice < slices;
    float acc[4][4];  // [which of the four positions][head]
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[t][u] = 0.f;
    for (int base = 0; base < len; base += C) {
        int end = base + C < len ? base + C : len;
        if (base > 0) {
            body_sync<Work>();
            load_kv_rows<NT>(vbuf, vc, base, end, hd, base);
        }
        cp_async_wait_all();
        body_sync<Work>();
        if (!active) continue;
        int pos = base + slice;
        for (; pos + 3 * slices < end; pos += 4 * slices) {
            float vv[4];
#pragma unroll
            for (int t = 0; t < 4; ++t) vv[t] = bf2f(vbuf[(long)(pos + t * slices - base) * hd + d]);
#pragma unroll
            for (int t = 0; t < 4; ++t)
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    if (u < hp) acc[t][u] += scores[u * len + pos + t * slices] * vv[t];
        }
        for (; pos < end; pos += slices) {
            const float vv = bf2f(vbuf[(long)(pos - base) * hd + d]);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (u < hp) acc[0][u] += scores[u * len + pos] * vv;
        }
    }
    body_sync<Work>();
    // Every staged row, q and the scores are consumed: the [slices][hp][hd] partial sums go to
    // the region's start (slices is capped above so that they fit).
    float* red = (float*)smem;
    if (active) {
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (u < hp) red[(slice * hp + u) * hd + d] = (acc[0][u] + acc[1][u]) + (acc[2][u] + acc[3][u]);
    }
    body_sync<Work>();
    const int outs = hp * hd;
    for (int idx = tid; idx < outs; idx += NT) {
        float sum = 0.f;
        for (int sl = 0; sl < slices; ++sl) sum += red[sl * outs + idx];
        L.attn[qh0 * hd + idx] = sum;
    }
}
'''

HELPER = '''// variant: the scores of one K row (16-byte aligned) with query heads h0 .. min(h0 + 4, hp) - 1
// (q: hp x hd floats), each chunk of the row read once; chunk order rotated by `rot` as in
// k_row_dot. Writes scores[h * len] (the row's position in each head's row) times `scale`.
__device__ __forceinline__ void k_row_dots4(const bf16* k, const float* q, int hd, int rot, int h0, int hp,
                                            float* scores, int len, float scale) {
    const uint4* krow = reinterpret_cast<const uint4*>(k);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const int chunks = hd / 8;
    int cc = rot % chunks;
    for (int n = 0; n < chunks; ++n, cc = cc + 1 == chunks ? 0 : cc + 1) {
        const uint4 w = krow[cc];
        const float kf[8] = {__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xFFFF0000u),
                             __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xFFFF0000u),
                             __uint_as_float(w.z << 16), __uint_as_float(w.z & 0xFFFF0000u),
                             __uint_as_float(w.w << 16), __uint_as_float(w.w & 0xFFFF0000u)};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (h0 + u >= hp) break;
            const float4* qh = reinterpret_cast<const float4*>(q + (h0 + u) * hd);
            const float4 qa = qh[2 * cc], qb = qh[2 * cc + 1];
            acc[u] += qa.x * kf[0] + qa.y * kf[1] + qa.z * kf[2] + qa.w * kf[3] + qb.x * kf[4] + qb.y * kf[5] +
                      qb.z * kf[6] + qb.w * kf[7];
        }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
        if (h0 + u < hp) scores[(h0 + u) * len] = acc[u] * scale;
}

'''

assert src.count(SCORES_OLD) == 1
src = src.replace(SCORES_OLD, SCORES_NEW)
a = src.index(OUTPUT_START)
b = src.index(OUTPUT_END, a) + len(OUTPUT_END)
src = src[:a] + OUTPUT_NEW + src[b:]
anchor = "// In-place softmax of `heads` rows of `len` scores"
assert src.count(anchor) == 1
src = src.replace(anchor, HELPER + anchor)
sys.stdout.write(src)
