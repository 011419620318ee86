#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Attention's further KV chunks double-buffered
(`tools/variants/kv_double_buffer.py`, predicted)"): writes to stdout a copy of
backend/kernels/mkc.cu whose attention body alternates its two KV buffers past the first
chunk, so that the next chunk's copy is in flight while this one is computed. Main copies each
further chunk after the previous one is computed, K for the scores and then V for the output:
two dependent passes per chunk (lease BE: ~0.9 µs each plus the rows). Here chunk i's rows
are in kbuf for even i and vbuf for odd i. The K history that was copied ahead is kept, but
the V history copied ahead into vbuf is overwritten by K's second chunk. The output pass then
copies every V chunk, the first two together, during the softmax. A history that fits one
chunk runs as in main. Both targets' attention (chain grid and persistent instruction) take
the body.

usage: python3 tools/variants/kv_double_buffer.py > v_kv_double_buffer.cu
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()
edits = [
    (
        "__device__ __forceinline__ void cp_async_wait_all() { asm volatile(\"cp.async.wait_all;\" ::: \"memory\"); }\n",
        "__device__ __forceinline__ void cp_async_wait_all() { asm volatile(\"cp.async.wait_all;\" ::: \"memory\"); }\n"
        "template <int N>\n"
        "__device__ __forceinline__ void cp_async_wait_group() { asm volatile(\"cp.async.wait_group %0;\" ::\"n\"(N) : \"memory\"); }\n",
    ),
    (
        """    for (int base = 0; base < n || base == 0; base += C) {
        int end = base + C < n ? base + C : n;
        if (base > 0) {
            body_sync<Work>();
            load_kv_rows<NT>(kbuf, kc, lo + base, lo + end, hd, lo + base);
        }
        cp_async_wait_all();
        if (base == 0 && kv_bar) mbar_wait(kv_bar, kv_parity);
        body_sync<Work>();
        if (base == 0) {
            mark(MARK_PREPARED);
            deps.prepared();
        }
        // One thread per (head, position): a warp shares the head and takes consecutive
        // positions, each starting its row at another 16-byte chunk (conflict-free).
        int c = end - base;
        for (int idx = tid; idx < hp * c; idx += NT) {
            int h = idx / c, i = idx % c;
            scores[h * n + base + i] = k_row_dot(kbuf + (long)i * hd, q + h * hd, hd, i) * scale;
        }
    }
    body_sync<Work>();
    mark(MARK_SUB1);""",
        """    // Past one chunk the buffers alternate: chunk ci's K rows in kbuf (even ci) or vbuf (odd),
    // the next chunk's copy issued before this one's scores.
    const int nchunks = n > C ? (n + C - 1) / C : 1;
    for (int ci = 0; ci < nchunks; ++ci) {
        int base = ci * C, end = base + C < n ? base + C : n;
        const bf16* kb = ci % 2 == 0 ? kbuf : vbuf;
        if (ci == 0) {
            cp_async_wait_all();
            if (kv_bar) mbar_wait(kv_bar, kv_parity);
            if (nchunks > 1) {
                body_sync<Work>();  // every copy into vbuf has landed before K's second chunk replaces it
                load_kv_rows<NT>(vbuf, kc, lo + C, lo + min(2 * C, n), hd, lo + C);
            }
        } else if (ci + 1 < nchunks) {
            int nb = (ci + 1) * C;  // into the buffer chunk ci - 1 left (the barrier below it)
            load_kv_rows<NT>(ci % 2 == 0 ? vbuf : kbuf, kc, lo + nb, lo + min(nb + C, n), hd, lo + nb);
            cp_async_wait_group<1>();
        } else {
            cp_async_wait_all();
        }
        body_sync<Work>();
        if (ci == 0) {
            mark(MARK_PREPARED);
            deps.prepared();
        }
        // One thread per (head, position): a warp shares the head and takes consecutive
        // positions, each starting its row at another 16-byte chunk (conflict-free).
        int c = end - base;
        for (int idx = tid; idx < hp * c; idx += NT) {
            int h = idx / c, i = idx % c;
            scores[h * n + base + i] = k_row_dot(kb + (long)i * hd, q + h * hd, hd, i) * scale;
        }
        if (ci + 1 < nchunks) body_sync<Work>();  // this buffer is free for chunk ci + 2
    }
    body_sync<Work>();
    if (nchunks > 1) {  // both buffers free: V's first two chunks copied during the softmax
        load_kv_rows<NT>(kbuf, vc, lo, lo + C, hd, lo);
        load_kv_rows<NT>(vbuf, vc, lo + C, lo + min(2 * C, n), hd, lo + C);
    }
    mark(MARK_SUB1);""",
    ),
    (
        """    for (int base = 0; base < n; base += C) {
        int end = base + C < n ? base + C : n;
        if (base > 0) {
            body_sync<Work>();
            load_kv_rows<NT>(vbuf, vc, lo + base, lo + end, hd, lo + base);
        }
        cp_async_wait_all();
        body_sync<Work>();
        if (!active) continue;
#pragma unroll
        for (int o = 0; o < 2; ++o) {
            int idx = idx0 + o * NT;
            if (idx < outs) {
                int h = idx / hd, d = idx % hd;
                const float* ph = scores + h * n;
                int pos = base + slice;
                for (; pos + 3 * slices < end; pos += 4 * slices) {
#pragma unroll
                    for (int u = 0; u < 4; ++u)
                        acc[o][u] += ph[pos + u * slices] * bf2f(vbuf[(long)(pos + u * slices - base) * hd + d]);
                }
                for (; pos < end; pos += slices) acc[o][0] += ph[pos] * bf2f(vbuf[(long)(pos - base) * hd + d]);
            }
        }
    }
    body_sync<Work>();""",
        """    for (int ci = 0; ci < nchunks; ++ci) {
        int base = ci * C, end = base + C < n ? base + C : n;
        // V chunk ci: the history copied ahead (one chunk), else kbuf (even ci) or vbuf (odd).
        bf16* vb = nchunks == 1 || ci % 2 == 1 ? vbuf : kbuf;
        if (nchunks > 1 && ci + 1 < nchunks)
            cp_async_wait_group<1>();  // chunk ci + 1's copy may still be in flight
        else
            cp_async_wait_all();
        body_sync<Work>();
        if (active) {
#pragma unroll
            for (int o = 0; o < 2; ++o) {
                int idx = idx0 + o * NT;
                if (idx < outs) {
                    int h = idx / hd, d = idx % hd;
                    const float* ph = scores + h * n;
                    int pos = base + slice;
                    for (; pos + 3 * slices < end; pos += 4 * slices) {
#pragma unroll
                        for (int u = 0; u < 4; ++u)
                            acc[o][u] += ph[pos + u * slices] * bf2f(vb[(long)(pos + u * slices - base) * hd + d]);
                    }
                    for (; pos < end; pos += slices) acc[o][0] += ph[pos] * bf2f(vb[(long)(pos - base) * hd + d]);
                }
            }
        }
        if (ci + 2 < nchunks) {  // this buffer takes chunk ci + 2 once every thread's sums are done
            body_sync<Work>();
            int nb = (ci + 2) * C;
            load_kv_rows<NT>(vb, vc, lo + nb, lo + min(nb + C, n), hd, lo + nb);
        }
    }
    body_sync<Work>();""",
    ),
]
for old, new in edits:
    assert src.count(old) == 1, old[:200]
    src = src.replace(old, new)
sys.stdout.write(src)
