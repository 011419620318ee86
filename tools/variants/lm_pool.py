#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Lease AK"): writes to stdout a copy of
backend/kernels/mkc.cu whose LM head takes its tasks from a pool at run time, in both the
persistent kernel and the chain's k_lm_head, instead of each SM streaming the run of tasks the
plan dealt it. The LM head is 525 MB of pure streaming with no consumer on the GPU; in lease
AF's H200 trace its 12 fast SMs (1.235x) ended 25 µs before the median SM and the slowest SM
6 µs after it, so the step ended with most of HBM idle.

How: a module global counts the tasks claimed this step. The producer lane claims one task
(TASK_PAGES_LM_HEAD pages) at a time with atomicAdd, two claims in flight so that a claim's
round trip hides behind the ring's wait, writes each page's index into a shared tag per ring
slot before its copy's expect_tx (the arrive releases it), and once a claim comes back past the
last task, posts an empty slot (tag -1, a plain arrive) to every consumer warp. The consumer
warps read each slot's tag after its full barrier and stop at their first empty slot, freeing it and the rest of theirs. The last CTA to
leave (the persistent kernel's epoch advance; a count of leaving CTAs in the chain) sets the
counter back to zero for the next launch. In the persistent kernel the consumers take the
ring's position after the LM head from the warps' empty slots, as the producer counts it.
Not handled (a variant): a run stopped by the watchdog leaves the counter dirty.

usage: python3 tools/variants/lm_pool.py > v_lm_pool.cu
"""
import pathlib
import sys

assert len(sys.argv) == 1, __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

POOL = r'''
// ---- variant: the LM head's tasks from a pool (tools/variants/lm_pool.py) ----
__device__ unsigned lm_pool_next;  // tasks claimed this launch (zeroed by the last CTA to leave)
__device__ unsigned lm_pool_left;  // chain: CTAs of k_lm_head that have left this launch

// Each ring slot's page (-1: the consumer warp's last slot of the pool), written before the
// slot's arrive.
__device__ __forceinline__ int* pool_tags() {
    __shared__ int tags[MAX_SLOTS];
    return tags;
}
// The ring position after the pool (the consumers' view: the last empty slot + 1).
__device__ __forceinline__ int* pool_end() {
    __shared__ int end;
    return &end;
}

// Producer (one lane): pages of claimed tasks, then an empty slot for every consumer warp that
// owns a slot. Returns the ring positions used (pages and empty slots), or fewer if `left`.
__device__ int produce_pooled(const Stream& s, const Matvec& v, const volatile int* left = nullptr,
                              const volatile int* boundary = nullptr, int held = 0) {
    const unsigned bytes = (unsigned)(v.page_rows * v.k * 2);
    const u64 policy = evict_first_policy();
    const unsigned tasks = (unsigned)(v.pages / v.task_pages);
    int* tags = pool_tags();
    int q = 0;
    unsigned c0 = atomicAdd(&lm_pool_next, 1u), c1 = atomicAdd(&lm_pool_next, 1u);
    for (;;) {
        const unsigned t = c0;
        c0 = c1;
        if (t >= tasks) break;
        c1 = atomicAdd(&lm_pool_next, 1u);
        for (int j = 0; j < v.task_pages; ++j, ++q) {
            int slot, lap;
            ring_slot(s, s.page0 + q, slot, lap);
            if (lap > 0 && !mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left)) return q;
            if (boundary && *boundary && !throttled_issue(s, s.page0 + q, held, boundary, left)) return q;
            const int page = (int)t * v.task_pages + j;
            tags[slot] = page;
            bf16* dst = s.ring + (long)slot * (PAGE_BYTES / 2);
            mbar_expect_tx(&s.full[slot], bytes);
            bulk_copy_hinted(dst, page_source(v, page, 0), bytes, &s.full[slot], policy);
        }
    }
    // The empty slots: consecutive ring positions up to the first at which every warp that owns
    // a slot has had one; each carries that end position (tag -2 - end), so that a warp frees all
    // of its empty slots and knows where the ring goes on.
    const int owners = s.slots < CONSUMER_WARPS ? s.slots : CONSUMER_WARPS;
    int end = s.page0 + q;
    for (unsigned covered = 0; covered != (1u << owners) - 1u; ++end) covered |= 1u << ring_owner_of(end, s.slots);
    for (; s.page0 + q < end; ++q) {
        int slot, lap;
        ring_slot(s, s.page0 + q, slot, lap);
        if (lap > 0 && !mbar_wait_unless(&s.empty[slot], (lap - 1) & 1, left)) return q;
        tags[slot] = -2 - end;
        mbar_arrive(&s.full[slot]);
    }
    return q;
}

// Consumer warp: the pool's pages in its slots until its first empty slot, whose tag gives the
// ring position after the pool (recorded in pool_end, the same from every warp).
template <int NJ, typename Epilogue>
__device__ void consume_pooled(const Stream& s, const Matvec& v, const float* x, Epilogue& epilogue) {
    constexpr int R = PAGE_BYTES / (2 * 256 * NJ);
    static_assert(NJ <= 8, "the LM head's row is held in registers");
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* tags = pool_tags();
    float xr[NJ][8];
    int loaded = -1;
    if (v.splits == 1) {  // one K chunk (the LM head): its slice before the first wait
        load_x<NJ>(xr, x, v.k, 0);
        loaded = 0;
    }
    bool landed_marked = false;
    for (int q = ring_next_of(s.page0, s.slots, warp);; q = ring_next_of(q + 1, s.slots, warp)) {
        int slot, lap;
        ring_slot(s, q, slot, lap);
        mbar_wait(&s.full[slot], lap & 1);
        const int page = tags[slot];
        if (page < 0) {  // the first of its empty slots: free them all (the ring goes on after them)
            const int end = -2 - page;
            for (int e = q; e < end; e = ring_next_of(e + 1, s.slots, warp)) {
                int eslot, elap;
                ring_slot(s, e, eslot, elap);
                if (e != q) mbar_wait(&s.full[eslot], elap & 1);
                __syncwarp();
                if (lane == 0) mbar_arrive(&s.empty[eslot]);
            }
            if (lane == 0) *pool_end() = end;
            break;
        }
        if (!landed_marked) {
            mark(MARK_LANDED);
            landed_marked = true;
        }
        int chunk, row0;
        page_coords(v, page, chunk, row0);
        if (chunk != loaded) {
            load_x<NJ>(xr, x, v.k, chunk);
            loaded = chunk;
        }
        float sums[R];
        page_dots<NJ, R>(s.ring + (long)slot * (PAGE_BYTES / 2), xr, sums);
        __syncwarp();
        if (lane == 0) mbar_arrive(&s.empty[slot]);
        epilogue(chunk, row0, sums);
    }
}

// run_stream for a pooled operator: no warming, the input staged in shared memory.
template <int NJ, typename Work, typename Deps, typename Prepare, typename Epilogue, typename Finish>
__device__ void run_stream_pooled(const Work& work, const Deps& deps, const Matvec& v, int x_len, const bf16* norm,
                                  int slots, Prepare prepare, Epilogue& epilogue, Finish finish) {
    Stream s = work.stream(x_len, norm, slots);
    deps.issued();
    if (Work::WHOLE_CTA && threadIdx.x >= CONSUMER_THREADS) {
        start_producer(s);
        if (threadIdx.x == CONSUMER_THREADS) produce_pooled(s, v);
        return;
    }
    mark(MARK_ISSUED);
    if (Work::WHOLE_CTA) ring_ready_wait();
    deps.wait();
    mark(MARK_RELEASED);
    if (threadIdx.x == 0) *pool_end() = 0;
    prepare(s);
    consumers_sync();
    mark(MARK_PREPARED);
    deps.prepared();
    consume_pooled<NJ>(s, v, s.x, epilogue);
    mark(MARK_COMPUTED);
    finish(s);
}
'''

edits = [
    # the pool's functions, after the producer's start (before warming)
    ("// The consumers' \"released\" flag in the stream's scratch, which stops the O-projection's warming.\n",
     "@POOL@// The consumers' \"released\" flag in the stream's scratch, which stops the O-projection's warming.\n"),
    # the LM head runs the pooled stream
    ("    run_stream<K_GROUPS_LM_HEAD, INPUT_STAGED, NO_WARMING>(work, deps, v, m.hidden, nullptr, op_norm(OP_LM_HEAD, g, L), RING_SLOTS_LM_HEAD, prepare, ep, finish);\n",
     "    run_stream_pooled<K_GROUPS_LM_HEAD>(work, deps, v, m.hidden, op_norm(OP_LM_HEAD, g, L), RING_SLOTS_LM_HEAD, prepare, ep, finish);\n"),
    # the chain's LM head: the last CTA to leave zeroes the pool
    ("    lm_head_body(m, g, L, ChainWork{}, GridDeps{pdl, early});\n    trace_end_stream();\n",
     "    lm_head_body(m, g, L, ChainWork{}, GridDeps{pdl, early});\n    trace_end_stream();\n"
     "    if (threadIdx.x == 0) {\n        __threadfence();\n"
     "        if (atomicAdd(&lm_pool_left, 1u) == gridDim.x - 1) lm_pool_left = 0, lm_pool_next = 0;\n    }\n"),
    # the persistent producer: the LM head from the pool
    ("        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT);\n        page0 += issued;\n        go = issued == count;\n",
     "        if (ins.op == OP_LM_HEAD) {\n"
     "            const int used = produce_pooled(s, v, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT);\n"
     "            page0 += used;\n            go = !*left;\n            continue;\n        }\n"
     "        const int issued = produce(s, v, first, count, left, boundary, PERSISTENT_BOUNDARY_INFLIGHT);\n        page0 += issued;\n        go = issued == count;\n"),
    # the persistent consumers: the ring position after a pooled LM head
    ("            page0_s += pages;\n",
     "            page0_s = op == OP_LM_HEAD ? *pool_end() : page0_s + pages;  // after the barrier: every warp's end\n"),
    # the persistent kernel's last CTA zeroes the pool
    ("        if (atomicAdd(p.exited, 1u) == step * gridDim.x - 1) atomicAdd(p.epoch, 1u);\n",
     "        if (atomicAdd(p.exited, 1u) == step * gridDim.x - 1) {\n            lm_pool_next = 0;\n            atomicAdd(p.epoch, 1u);\n        }\n"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
src = src.replace("@POOL@", POOL.lstrip("\n") + "\n", 1)
sys.stdout.write(src)
