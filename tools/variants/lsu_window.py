#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AL"): writes to stdout a copy of
backend/kernels/mkc.cu whose persistent producer is its whole warp and copies some pages by
16-byte `cp.async` (LDGSTS, the load/store path) instead of one bulk copy (the TMA path).

Why: `mkc probe latency` (perf.md, seventh and eighth sessions) put an L2 hit at 1.3-1.4 µs
while every SM keeps 8 bulk copies in flight (4.73 TB/s), 0.37 µs with one (2.82 TB/s: the
boundary hold's queue), and 0.44 µs while one warp per SM keeps 4-8 pages in flight by
`cp.async` (4.10 TB/s). Main holds its producer to one bulk copy in flight from an
instruction's end barrier until the next one's inputs are staged (the window in which the
activation loads, polls and signals are on the step's critical path), which costs the stream
(lease S: 74 µs on an H100). Here a page issued in that window goes by the warp's `cp.async`
at the ring's full depth, no hold: near the held window's hit latency at 1.5x its bandwidth.

Modes: `window` (cp.async inside the window, bulk copies outside it), `always` (every page by
cp.async: what the load/store path streams alone). The chain kernels are main's.

How: the producer warp's 32 lanes all walk the instructions; lane 0 takes every decision (slot
waits, the window flag, KV history copies) and the warp follows it by shuffles. A cp.async page:
each lane copies its 16-byte words of it (an L2 evict-first hint, as the bulk copies have) and
`cp.async.mbarrier.arrive` (the pending count raised now, lowered when its copies land), then
lane 0 arrives on the slot's full barrier: the phase completes once every lane's copies landed.

usage: python3 tools/variants/lsu_window.py window|always > v_lsu.cu
"""
import pathlib
import sys

assert len(sys.argv) == 2 and sys.argv[1] in ("window", "always"), __doc__
always = sys.argv[1] == "always"
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

WARP = r'''
// ---- variant: the producer warp copies pages by 16-byte cp.async (tools/variants/lsu_window.py) ----
// This lane's 16-byte words of a `bytes`-long run, by cp.async with an L2 hint.
__device__ __forceinline__ void lsu_copy(bf16* dst, const bf16* src, unsigned bytes, u64 policy) {
    const unsigned lane = threadIdx.x % 32;
    for (unsigned off = lane * 16; off < bytes; off += 512)
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;"
                     ::"r"(smem_addr((char*)dst + off)), "l"((const char*)src + off), "l"(policy)
                     : "memory");
}

// produce() for the persistent producer warp (all 32 lanes call it; lane 0 decides).
__device__ int produce_warp(const Stream& s, const Matvec& v, int first, int count, const volatile int* left,
                            const volatile int* boundary) {
    const unsigned bytes = (unsigned)(v.page_rows * v.k * 2);
    const u64 policy = evict_first_policy();
    const int lane = threadIdx.x % 32;
    for (int i = 0; i < count; ++i) {
        int slot, lap;
        ring_slot(s, s.page0 + i, slot, lap);
        int ok = 1;
        if (lane == 0 && lap > 0) ok = mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left);
        if (!__shfl_sync(0xffffffffu, ok, 0)) return i;
        const int lsu = __shfl_sync(0xffffffffu, @LSU@, 0);
        bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
        const bool paired = v.page_out != v.page_rows;
        if (lsu) {
            if (paired) {
                lsu_copy(dst, page_source(v, first + i, 0), bytes / 2, policy);
                lsu_copy(dst + bytes / 4, page_source(v, first + i, 1), bytes / 2, policy);
            } else {
                lsu_copy(dst, page_source(v, first + i, 0), bytes, policy);
            }
            asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(smem_addr(&s.full[slot])) : "memory");
            __syncwarp();
            if (lane == 0) mbar_arrive(&s.full[slot]);
        } else if (lane == 0) {
            mbar_expect_tx(&s.full[slot], bytes);
            if (paired) {
                bulk_copy_hinted(dst, page_source(v, first + i, 0), bytes / 2, &s.full[slot], policy);
                bulk_copy_hinted(dst + bytes / 4, page_source(v, first + i, 1), bytes / 2, &s.full[slot], policy);
            } else {
                bulk_copy_hinted(dst, page_source(v, first + i, 0), bytes, &s.full[slot], policy);
            }
        }
        __syncwarp();
    }
    return count;
}
'''.replace("@LSU@", "1" if always else "(boundary && *boundary) ? 1 : 0")

PRODUCER = r'''__device__ void persistent_producer(const Model& m, const Globals& g, const Persistent& p, int begin, int end,
                                    const volatile int* left, const volatile int* boundary) {
    // variant: the whole producer warp runs this; lane 0 decides, the warp follows.
    const int lane = threadIdx.x % 32;
    int page0 = 0, kvs = 0;
    bool go = true;
    for (int i = begin; go && i < end; ++i) {
        const Instr ins = p.instrs[i];
        const Layer& L = p.layers[ins.layer];
        if (ins.op == OP_ATTENTION) {
            int ok = 1;
            if (lane == 0 && kvs > 0) ok = mbar_wait_unless(persistent_kv_free(), (kvs - 1) & 1, left);
            if (!__shfl_sync(0xffffffffu, ok, 0)) {
                go = false;
                break;
            }
            if (lane == 0) {
                const int gq = m.heads / m.kv_heads, hp = gq / m.attn_split, hd = m.head_dim;
                const int C = kv_chunk_of(PERSISTENT_ATT_BYTES, hp, hd, m.max_seq);
                const int pos = *g.pos, len = pos + 1, first = len < C ? len : C, hist = pos < first ? pos : first;
                const long kv0 = (long)(ins.first / m.attn_split) * m.max_seq * hd;
                bf16* kbuf = (bf16*)(smem_raw + PERSISTENT_ATT_OFFSET);
                bf16* vbuf = kbuf + C * hd;
                u64* bar = persistent_kv_full();
                mbar_expect_tx(bar, (unsigned)(hist * hd * 4));
                if (hist > 0) {
                    bulk_copy(vbuf, L.v_cache + kv0, (unsigned)(hist * hd * 2), bar);
                    bulk_copy(kbuf, L.k_cache + kv0, (unsigned)(hist * hd * 2), bar);
                }
            }
            __syncwarp();
            ++kvs;
            continue;
        }
        Stream s = persistent_stream(page0, nullptr);
        const Matvec v = op_matvec(ins.op, m, g, L);
        int first, count;
        page_range(PersistentWork{ins.first, ins.count, page0, -1}, v, first, count);
        const int issued = produce_warp(s, v, first, count, left, boundary);
        page0 += issued;
        go = issued == count;
    }
    // Before the warp exits (every lane: each waits for its own copies' phases too), the last copy of every slot and KV history lands:
'''

old_start = "__device__ void persistent_producer(const Model& m, const Globals& g, const Persistent& p, int begin, int end,\n"
old_end = "    // Before the lane exits, the last copy of every slot and KV history lands:\n"
a = src.index(old_start)
b = src.index(old_end, a) + len(old_end)
assert src.count(old_start) == 1
src = src[:a] + WARP.lstrip("\n") + "\n" + PRODUCER + src[b:]

edits = [
    ("        if (threadIdx.x == CONSUMER_THREADS)\n            persistent_producer(m, g, p, begin, end, &left_s,\n"
     "                                PERSISTENT_BOUNDARY_INFLIGHT < PERSISTENT_SLOTS ? &boundary_s : nullptr);\n",
     "        persistent_producer(m, g, p, begin, end, &left_s, &boundary_s);  // variant: the whole warp\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
