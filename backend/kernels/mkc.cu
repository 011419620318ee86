// mkc's decode operators for Llama-style models, bf16 weights, batch 1.
//
// One device function per operator kind (qkv_rope, attention, o_proj / down (split-K matvec
// with residual), up_gate, lm_head); each `extern "C"` kernel is a thin grid wrapper around it so
// that a persistent interpreter can call the same bodies. Compiled at run time by NVRTC for
// sm_90a; no CUDA headers are needed (bf16 is handled as raw 16-bit values).
//
// Dependency protocol inside a chain (PDL): every kernel first issues its independent loads
// (its weight tile, with cp.async into shared memory; KV history prefetches), then triggers its
// successor if the schedule says `early`, then waits (griddepcontrol.wait) before its first read
// of anything the step produced. Buffers the predecessor writes are read with plain (coherent)
// loads, never through `const __restrict__` pointers.

typedef unsigned short bf16;
typedef unsigned long long u64;

#define THREADS 256
#define WARPS (THREADS / 32)
// Shared-memory stage for weights: 64 KiB.
#define STAGE_BYTES 65536

struct Model {
    int hidden, inter, q_dim, kv_dim, heads, kv_heads, head_dim, vocab, layers;
    int tile_rows, lm_tile_rows, attn_split, s_attn, s_down, max_seq;
    float eps, log2_theta;
};

struct Globals {
    const bf16* embed;      // [vocab][hidden]
    const bf16* lm_head;    // [vocab][hidden] (== embed when tied)
    const bf16* final_norm; // [hidden]
    u64* tokens;            // packed (key, ~index) per position; tokens[pos] is the input token
    const int* pos;         // current position
    float* logits;          // [vocab] of the current step
    float* x_final;         // residual stream entering the LM head: the last layer's x_out
};

struct Layer {
    const bf16* w_qkv;  // [q_dim + 2 kv_dim][hidden], q and k rows pair-interleaved per head
    const bf16* w_o;    // [hidden][q_dim]
    const bf16* w_gate; // [inter][hidden]
    const bf16* w_up;   // [inter][hidden]
    const bf16* w_down; // [hidden][inter]
    const bf16* norm1;  // [hidden]
    const bf16* norm2;  // [hidden]
    bf16* k_cache;      // [kv_heads][max_seq][head_dim]
    bf16* v_cache;      // [kv_heads][max_seq][head_dim]
    const float* x_in;  // residual input, null for layer 0 (the embedding row)
    float* qkv;         // [q_dim + 2 kv_dim]
    float* attn;        // [q_dim]
    float* o_part;      // [s_attn][hidden]
    unsigned* o_arrive; // [hidden / tile_rows]
    float* x_mid;       // [hidden]
    float* h;           // [inter]
    float* d_part;      // [s_down][hidden]
    unsigned* d_arrive; // [hidden / tile_rows]
    float* x_out;       // [hidden]
};

// ---- small helpers ---------------------------------------------------------------------

__device__ __forceinline__ float bf2f(bf16 h) { return __uint_as_float(((unsigned)h) << 16); }

__device__ __forceinline__ bf16 f2bf(float f) {
    unsigned u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// CTA phase tracing (mkc bench --cta-phases), compiled in only with -DMKC_TRACE: the marks cost
// ~8% of the step even when no trace buffer is given. Thread 0 of each CTA records clock64() at
// the phase marks below (slots 0-6) and %globaltimer at entry and exit (slots 8, 9).
#define TRACE_SLOTS 10
enum { MARK_ENTRY = 0, MARK_ISSUED = 1, MARK_RELEASED = 2, MARK_PREPARED = 3, MARK_LANDED = 4,
       MARK_COMPUTED = 5, MARK_EXIT = 6 };
#ifdef MKC_TRACE
__shared__ u64* trace_ptr;

__device__ __forceinline__ u64 globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void mark(int slot) {
    if (threadIdx.x == 0 && trace_ptr) trace_ptr[blockIdx.x * TRACE_SLOTS + slot] = (u64)clock64();
}

__device__ __forceinline__ void trace_begin(u64* trace) {
    if (threadIdx.x == 0) {
        trace_ptr = trace;
        if (trace) {
            trace[blockIdx.x * TRACE_SLOTS + 8] = globaltimer();
            trace[blockIdx.x * TRACE_SLOTS + MARK_ENTRY] = (u64)clock64();
        }
    }
}

__device__ __forceinline__ void trace_end() {
    if (threadIdx.x == 0 && trace_ptr) {
        trace_ptr[blockIdx.x * TRACE_SLOTS + MARK_EXIT] = (u64)clock64();
        trace_ptr[blockIdx.x * TRACE_SLOTS + 9] = globaltimer();
    }
}
#else
__device__ __forceinline__ void mark(int) {}
__device__ __forceinline__ void trace_begin(u64*) {}
__device__ __forceinline__ void trace_end() {}
#endif

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; `scratch` holds WARPS floats. All threads get the result.
__device__ float block_sum(float v, float* scratch) {
    v = warp_sum(v);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0) scratch[w] = v;
    __syncthreads();
    float t = 0.f;
    for (int i = 0; i < WARPS; ++i) t += scratch[i];
    return t;
}

// Token id held in a packed argmax value.
__device__ __forceinline__ unsigned token_of(u64 packed) {
    return 0xFFFFFFFFu - (unsigned)(packed & 0xFFFFFFFFull);
}

// Issues cp.async copies of `rows` x `k` bf16 (row stride `ld`, starting at column `col0`)
// into `dst` (dense rows of k). k must be a multiple of 8.
__device__ void load_tile(bf16* dst, const bf16* w, long row0, int rows, long ld, long col0, int k) {
    int chunks_per_row = k / 8;
    int total = rows * chunks_per_row;
    for (int i = threadIdx.x; i < total; i += THREADS) {
        int r = i / chunks_per_row, c = i % chunks_per_row;
        cp_async16(dst + (long)r * k + c * 8, w + (row0 + r) * ld + col0 + c * 8);
    }
    cp_async_commit();
}

// Loads the residual input of a layer into shared memory as floats: the embedding row of the
// current token for layer 0, else x_in.
__device__ void load_residual(float* dst, const Model& m, const Globals& g, const Layer& L, int n, int offset) {
    if (L.x_in == 0) {
        int p = *g.pos;
        unsigned tok = token_of(g.tokens[p]);
        const bf16* row = g.embed + (long)tok * m.hidden + offset;
        for (int i = threadIdx.x; i < n; i += THREADS) dst[i] = bf2f(row[i]);
    } else {
        for (int i = threadIdx.x; i < n; i += THREADS) dst[i] = L.x_in[offset + i];
    }
}

// x (already in smem, length n) <- x * rsqrt(mean(x^2) + eps) * w.
__device__ void rmsnorm_inplace(float* x, const bf16* w, int n, float eps, float* scratch) {
    float ss = 0.f;
    for (int i = threadIdx.x; i < n; i += THREADS) ss += x[i] * x[i];
    float total = block_sum(ss, scratch);
    float inv = rsqrtf(total / n + eps);
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += THREADS) x[i] = x[i] * inv * bf2f(w[i]);
    __syncthreads();
}

// out[r] = dot(W[r], x) for `rows` dense rows of length k in shared memory.
// Each thread owns 8-column chunks (t, t + THREADS, ...) and keeps their x values in registers
// while it walks down the rows, so shared memory carries each weight once and each x value once
// per chunk: reading x again for every row made the dot product, not HBM, the bottleneck
// (compute alone took as long as the bandwidth floor). Per-row sums are reduced across lanes with
// shuffles and across warps through `scratch` (WARPS x DOT_ROWS floats).
#define DOT_ROWS 16
__device__ void dot_rows(const bf16* w, const float* x, int rows, int k, float* out, float* scratch) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int chunks = k / 8;
    for (int r0 = 0; r0 < rows; r0 += DOT_ROWS) {
        int n = rows - r0 < DOT_ROWS ? rows - r0 : DOT_ROWS;
        float acc[DOT_ROWS];
#pragma unroll
        for (int r = 0; r < DOT_ROWS; ++r) acc[r] = 0.f;
        for (int c = threadIdx.x; c < chunks; c += THREADS) {
            float4 xa = *reinterpret_cast<const float4*>(x + c * 8);
            float4 xb = *reinterpret_cast<const float4*>(x + c * 8 + 4);
            float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
            for (int r = 0; r < DOT_ROWS; ++r) {
                if (r < n) {
                    uint4 packed = *reinterpret_cast<const uint4*>(w + (long)(r0 + r) * k + c * 8);
                    unsigned words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        acc[r] += __uint_as_float(words[j] << 16) * xv[2 * j];
                        acc[r] += __uint_as_float(words[j] & 0xFFFF0000u) * xv[2 * j + 1];
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < DOT_ROWS; ++r) {
            float v = warp_sum(acc[r]);
            if (lane == 0 && r < n) scratch[warp * DOT_ROWS + r] = v;
        }
        __syncthreads();
        if (threadIdx.x < n) {
            float t = 0.f;
            for (int wi = 0; wi < WARPS; ++wi) t += scratch[wi * DOT_ROWS + threadIdx.x];
            out[r0 + threadIdx.x] = t;
        }
        __syncthreads();
    }
}

// Shared-memory layout of the matvec kernels:
// [weight stage: STAGE_BYTES | activation vector: k floats | results: 256 floats | scratch].
// The stage size is a compile-time constant on purpose: sizing it from %dynamic_smem_size and
// placing the vector after it made every matvec kernel about 2x slower on the H200 (the
// vector's alignment was unknown and its loads were no longer vectorised); a vector-first layout
// with a tile-sized stage measured 2-4% slower than this one.
struct Smem {
    bf16* w;
    float* x;
    float* res;
    float* scratch;
};

extern __shared__ __align__(16) unsigned char smem_raw[];

// Bytes of the weight stage.
__device__ __forceinline__ int stage_bytes(int k) {
    (void)k;
    return STAGE_BYTES;
}

__device__ Smem carve(unsigned char* base, int k) {
    Smem s;
    s.w = (bf16*)base;
    s.x = (float*)(base + STAGE_BYTES);
    s.res = s.x + k;
    s.scratch = s.res + 256;
    return s;
}

// Rows of a k-wide tile that fit one weight stage.
__device__ __forceinline__ int stage_rows_for(int rows, int k) {
    int sr = stage_bytes(k) / (k * 2);
    return sr < rows ? sr : rows;
}

// Dot products of `rows` weight rows with s.x, streamed through the stage buffer. The first
// stage must already have been issued (before the grid's wait); later stages reuse the buffer.
__device__ void staged_dots(const Smem& s, const bf16* w, long row0, int rows, long ld, long col0, int k, float* out) {
    int sr = stage_rows_for(rows, k);
    for (int done = 0; done < rows; done += sr) {
        int n = rows - done < sr ? rows - done : sr;
        if (done > 0) {
            __syncthreads();
            load_tile(s.w, w, row0 + done, n, ld, col0, k);
        } else {
            mark(MARK_PREPARED);
        }
        cp_async_wait_all();
        __syncthreads();
        if (done == 0) mark(MARK_LANDED);
        dot_rows(s.w, s.x, n, k, out + done, s.scratch);
    }
    __syncthreads();
    mark(MARK_COMPUTED);
}

// ---- operator bodies ---------------------------------------------------------------------

// (1) RMSNorm + QKV + RoPE + KV append (layer 0: embedding gather). Tile `t` of tile_rows rows.
__device__ void qkv_rope_body(const Model& m, const Globals& g, const Layer& L, int t, int pdl, int early) {
    int T = m.tile_rows;
    Smem s = carve(smem_raw, m.hidden);
    long row0 = (long)t * T;
    load_tile(s.w, L.w_qkv, row0, stage_rows_for(T, m.hidden), m.hidden, 0, m.hidden);
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    load_residual(s.x, m, g, L, m.hidden, 0);
    __syncthreads();
    rmsnorm_inplace(s.x, L.norm1, m.hidden, m.eps, s.scratch);
    staged_dots(s, L.w_qkv, row0, T, m.hidden, 0, m.hidden, s.res);
    int p = *g.pos;
    // RoPE on pair-interleaved q/k rows: rows (2i, 2i+1) of a head rotate with frequency i.
    for (int i = threadIdx.x; i < T / 2; i += THREADS) {
        int r = (int)row0 + 2 * i;
        float a = s.res[2 * i], b = s.res[2 * i + 1];
        if (r < m.q_dim + m.kv_dim) {
            int pair = (r % m.head_dim) / 2;
            float freq = exp2f(-2.0f * pair / m.head_dim * m.log2_theta);
            float sn, cs;
            sincosf((float)p * freq, &sn, &cs);
            s.res[2 * i] = a * cs - b * sn;
            s.res[2 * i + 1] = a * sn + b * cs;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < T; i += THREADS) {
        int r = (int)row0 + i;
        float v = s.res[i];
        L.qkv[r] = v;
        if (r >= m.q_dim) {
            int kr = r - m.q_dim;
            bool is_v = kr >= m.kv_dim;
            if (is_v) kr -= m.kv_dim;
            int head = kr / m.head_dim, d = kr % m.head_dim;
            bf16* cache = is_v ? L.v_cache : L.k_cache;
            cache[((long)head * m.max_seq + p) * m.head_dim + d] = f2bf(v);
        }
    }
}

// (2) Decode attention: task = (KV head, query-head group). K and V rows are staged in shared
// memory by cp.async in chunks of ATT_CHUNK positions: the history of the first chunk is issued
// before the wait (it was written by earlier steps), the current position after it.
#define ATT_CHUNK 256

// Issues cp.async copies of rows [from, to) of a [pos][hd] bf16 cache into `dst` (row-major).
__device__ void load_kv_rows(bf16* dst, const bf16* cache, int from, int to, int hd, int base) {
    int chunks = hd / 8;
    int total = (to - from) * chunks;
    for (int i = threadIdx.x; i < total; i += THREADS) {
        int r = from + i / chunks, c = i % chunks;
        cp_async16(dst + (long)(r - base) * hd + c * 8, cache + (long)r * hd + c * 8);
    }
    cp_async_commit();
}

__device__ void attention_body(const Model& m, const Globals& g, const Layer& L, int t, int pdl, int early) {
    int gq = m.heads / m.kv_heads;
    int hp = gq / m.attn_split;
    int kvh = t / m.attn_split, split = t % m.attn_split;
    int qh0 = kvh * gq + split * hp;
    int hd = m.head_dim;
    const bf16* kc = L.k_cache + (long)kvh * m.max_seq * hd;
    const bf16* vc = L.v_cache + (long)kvh * m.max_seq * hd;
    // Layout: [K chunk | V chunk | q (hp x hd floats) | scores (hp x max_seq) | partials].
    bf16* kbuf = (bf16*)smem_raw;
    bf16* vbuf = kbuf + ATT_CHUNK * hd;
    float* q = (float*)(vbuf + ATT_CHUNK * hd);
    float* scores = q + hp * hd;
    // The position is written by the host before the step, so it may be read before the wait.
    int p = *g.pos;
    int len = p + 1;
    int first = len < ATT_CHUNK ? len : ATT_CHUNK;
    // Independent loads: the history of the first chunk (positions < p).
    int hist = p < first ? p : first;
    load_kv_rows(kbuf, kc, 0, hist, hd, 0);
    load_kv_rows(vbuf, vc, 0, hist, hd, 0);
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    if (hist < first) {  // the current position, written by this step's QKV grid
        load_kv_rows(kbuf, kc, hist, first, hd, 0);
        load_kv_rows(vbuf, vc, hist, first, hd, 0);
    }
    for (int i = threadIdx.x; i < hp * hd; i += THREADS) q[i] = L.qkv[qh0 * hd + i];
    float scale = rsqrtf((float)hd);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // Scores, chunk by chunk: one thread per position.
    for (int base = 0; base < len; base += ATT_CHUNK) {
        int end = base + ATT_CHUNK < len ? base + ATT_CHUNK : len;
        if (base > 0) {
            __syncthreads();
            load_kv_rows(kbuf, kc, base, end, hd, base);
        }
        cp_async_wait_all();
        __syncthreads();
        for (int pos = base + threadIdx.x; pos < end; pos += THREADS) {
            const uint4* krow = reinterpret_cast<const uint4*>(kbuf + (long)(pos - base) * hd);
            float acc[8];
#pragma unroll
            for (int h = 0; h < 8; ++h) acc[h] = 0.f;
            for (int c = 0; c < hd / 8; ++c) {
                uint4 w = krow[c];
                unsigned words[4] = {w.x, w.y, w.z, w.w};
                float kv[8];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    kv[2 * j] = __uint_as_float(words[j] << 16);
                    kv[2 * j + 1] = __uint_as_float(words[j] & 0xFFFF0000u);
                }
#pragma unroll
                for (int h = 0; h < 8; ++h) {
                    if (h < hp) {
                        const float* qh = q + h * hd + c * 8;
#pragma unroll
                        for (int j = 0; j < 8; ++j) acc[h] += qh[j] * kv[j];
                    }
                }
            }
#pragma unroll
            for (int h = 0; h < 8; ++h)
                if (h < hp) scores[h * len + pos] = acc[h] * scale;
        }
    }
    __syncthreads();
    // Softmax per head: warp h handles head h (and h + WARPS, ...).
    for (int h = warp; h < hp; h += WARPS) {
        float mx = -3.0e38f;
        for (int i = lane; i < len; i += 32) mx = fmaxf(mx, scores[h * len + i]);
        mx = warp_max(mx);
        float sum = 0.f;
        for (int i = lane; i < len; i += 32) {
            float e = __expf(scores[h * len + i] - mx);
            scores[h * len + i] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        float inv = 1.f / sum;
        for (int i = lane; i < len; i += 32) scores[h * len + i] *= inv;
    }
    // Output: warp w takes positions w, w + WARPS, ... of each chunk; lanes hold hp x (hd / 32)
    // accumulators; warps are summed through shared memory at the end.
    const int per_lane = (hd + 31) / 32;  // <= 4 (checked on the host)
    float acc[8][4];
#pragma unroll
    for (int h = 0; h < 8; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[h][j] = 0.f;
    for (int base = 0; base < len; base += ATT_CHUNK) {
        int end = base + ATT_CHUNK < len ? base + ATT_CHUNK : len;
        if (base > 0) {
            __syncthreads();
            load_kv_rows(vbuf, vc, base, end, hd, base);
            cp_async_wait_all();
        }
        __syncthreads();
        for (int pos = base + warp; pos < end; pos += WARPS) {
            const bf16* vrow = vbuf + (long)(pos - base) * hd;
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = (j < per_lane && lane + 32 * j < hd) ? bf2f(vrow[lane + 32 * j]) : 0.f;
#pragma unroll
            for (int h = 0; h < 8; ++h) {
                if (h < hp) {
                    float p_h = scores[h * len + pos];
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[h][j] += p_h * v[j];
                }
            }
        }
    }
    __syncthreads();
    float* partial = scores;  // [WARPS][hp * hd]
#pragma unroll
    for (int h = 0; h < 8; ++h)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (h < hp && j < per_lane && lane + 32 * j < hd) partial[warp * hp * hd + h * hd + lane + 32 * j] = acc[h][j];
    __syncthreads();
    for (int i = threadIdx.x; i < hp * hd; i += THREADS) {
        float sum = 0.f;
        for (int w = 0; w < WARPS; ++w) sum += partial[w * hp * hd + i];
        L.attn[qh0 * hd + i] = sum;
    }
}

// (3)/(5) Split-K matvec + residual: tile = chunk * row_tiles + row_tile. Each chunk stores its
// partial; the last chunk to arrive for a row tile sums them in chunk order (deterministic)
// with the residual. With one chunk the partial is the result.
__device__ void splitk_body(const Model& m, const Globals& g, const Layer& L, int t, int pdl, int early,
                            const bf16* w, long ld, const float* input, int k_total, int splits,
                            float* part, unsigned* arrive, bool residual_from_mid, float* out) {
    int T = m.tile_rows;
    int row_tiles = m.hidden / T;
    int c = t / row_tiles, r = t % row_tiles;
    int k = k_total / splits;
    Smem s = carve(smem_raw, k);
    load_tile(s.w, w, (long)r * T, stage_rows_for(T, k), ld, (long)c * k, k);
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    for (int i = threadIdx.x; i < k; i += THREADS) s.x[i] = input[c * k + i];
    __syncthreads();
    staged_dots(s, w, (long)r * T, T, ld, (long)c * k, k, s.res);
    __shared__ int last;
    if (splits > 1) {
        for (int i = threadIdx.x; i < T; i += THREADS) part[(long)c * m.hidden + r * T + i] = s.res[i];
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = ((atomicAdd(&arrive[r], 1u) + 1u) % (unsigned)splits) == 0u;
        __syncthreads();
        if (!last) return;
        __threadfence();
    }
    // Residual rows.
    float* resid = s.x;  // reuse: T floats
    __syncthreads();
    if (residual_from_mid) {
        for (int i = threadIdx.x; i < T; i += THREADS) resid[i] = L.x_mid[r * T + i];
    } else {
        load_residual(resid, m, g, L, T, r * T);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < T; i += THREADS) {
        float acc = resid[i];
        if (splits > 1) {
            for (int cc = 0; cc < splits; ++cc) acc += __ldcg(&part[(long)cc * m.hidden + r * T + i]);
        } else {
            acc += s.res[i];
        }
        out[r * T + i] = acc;
    }
}

// (4) RMSNorm + gate/up matvecs + SiLU(gate) * up: two weight stages through one buffer.
__device__ void up_gate_body(const Model& m, const Globals& g, const Layer& L, int t, int pdl, int early) {
    int T = m.tile_rows;
    Smem s = carve(smem_raw, m.hidden);
    long row0 = (long)t * T;
    // Both matrices' rows in one stage when they fit (all loads issued before the wait).
    bool one_stage = 2 * T * m.hidden * 2 <= stage_bytes(m.hidden);
    if (one_stage) {
        load_tile(s.w, L.w_gate, row0, T, m.hidden, 0, m.hidden);
        load_tile(s.w + (long)T * m.hidden, L.w_up, row0, T, m.hidden, 0, m.hidden);
    } else {
        load_tile(s.w, L.w_gate, row0, stage_rows_for(T, m.hidden), m.hidden, 0, m.hidden);
    }
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    for (int i = threadIdx.x; i < m.hidden; i += THREADS) s.x[i] = L.x_mid[i];
    __syncthreads();
    rmsnorm_inplace(s.x, L.norm2, m.hidden, m.eps, s.scratch);
    if (one_stage) {
        mark(MARK_PREPARED);
        cp_async_wait_all();
        __syncthreads();
        mark(MARK_LANDED);
        dot_rows(s.w, s.x, 2 * T, m.hidden, s.res, s.scratch);
        __syncthreads();
        mark(MARK_COMPUTED);
    } else {
        staged_dots(s, L.w_gate, row0, T, m.hidden, 0, m.hidden, s.res);
        load_tile(s.w, L.w_up, row0, stage_rows_for(T, m.hidden), m.hidden, 0, m.hidden);
        staged_dots(s, L.w_up, row0, T, m.hidden, 0, m.hidden, s.res + T);
    }
    for (int i = threadIdx.x; i < T; i += THREADS) {
        float gt = s.res[i], up = s.res[T + i];
        L.h[row0 + i] = gt / (1.f + __expf(-gt)) * up;
    }
}

// (6) Final RMSNorm + LM head + fused argmax into tokens[pos + 1].
__device__ void lm_head_body(const Model& m, const Globals& g, int t, int pdl, int early) {
    int T = m.lm_tile_rows;
    Smem s = carve(smem_raw, m.hidden);
    long row0 = (long)t * T;
    load_tile(s.w, g.lm_head, row0, stage_rows_for(T, m.hidden), m.hidden, 0, m.hidden);
    mark(MARK_ISSUED);
    if (pdl && early) pdl_trigger();
    if (pdl) pdl_wait();
    mark(MARK_RELEASED);
    for (int i = threadIdx.x; i < m.hidden; i += THREADS) s.x[i] = g.x_final[i];
    __syncthreads();
    rmsnorm_inplace(s.x, g.final_norm, m.hidden, m.eps, s.scratch);
    staged_dots(s, g.lm_head, row0, T, m.hidden, 0, m.hidden, s.res);
    int p = *g.pos;
    if (threadIdx.x < 32) {
        u64 best = 0;
        for (int i = threadIdx.x; i < T; i += 32) {
            float v = s.res[i];
            g.logits[row0 + i] = v;
            unsigned u = __float_as_uint(v);
            unsigned key = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
            u64 packed = ((u64)key << 32) | (u64)(0xFFFFFFFFu - (unsigned)(row0 + i));
            best = packed > best ? packed : best;
        }
        for (int o = 16; o > 0; o >>= 1) {
            u64 other = __shfl_xor_sync(0xffffffffu, best, o);
            best = other > best ? other : best;
        }
        if (threadIdx.x == 0) atomicMax(&g.tokens[p + 1], best);
    }
}

// ---- grid wrappers -------------------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(THREADS) k_qkv_rope(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    qkv_rope_body(m, g, L, blockIdx.x, pdl, early);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS) k_attention(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    attention_body(m, g, L, blockIdx.x, pdl, early);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS) k_o_proj(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    splitk_body(m, g, L, blockIdx.x, pdl, early, L.w_o, m.q_dim, L.attn, m.q_dim, m.s_attn, L.o_part,
                L.o_arrive, false, L.x_mid);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS) k_up_gate(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    up_gate_body(m, g, L, blockIdx.x, pdl, early);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS) k_down(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    splitk_body(m, g, L, blockIdx.x, pdl, early, L.w_down, m.inter, L.h, m.inter, m.s_down, L.d_part,
                L.d_arrive, true, L.x_out);
    trace_end();
}

extern "C" __global__ void __launch_bounds__(THREADS) k_lm_head(Model m, Globals g, Layer L, int pdl, int early, u64* trace) {
    trace_begin(trace);
    (void)L;
    lm_head_body(m, g, blockIdx.x, pdl, early);
    trace_end();
}

// Deterministic weights: a counter-based hash the CPU reproduces bit for bit.
__device__ __forceinline__ unsigned mix(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

// out[i] = (byte - 128) * 2^-shift, byte = mix(seed ^ mix(stream) + i) & 255: exact in bf16.
extern "C" __global__ void k_fill_matrix(bf16* out, unsigned long long n, unsigned seed, unsigned stream, int shift) {
    unsigned base = mix(seed ^ mix(stream));
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int byte = (int)(mix(base + (unsigned)i + (unsigned)(i >> 32) * 0x9e3779b9u) & 255u);
        out[i] = f2bf(ldexpf((float)(byte - 128), -shift));
    }
}

// Norm weights: 1 + (byte - 128) / 512, exact in bf16.
extern "C" __global__ void k_fill_norm(bf16* out, unsigned long long n, unsigned seed, unsigned stream) {
    unsigned base = mix(seed ^ mix(stream));
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        int byte = (int)(mix(base + (unsigned)i) & 255u);
        out[i] = f2bf(1.0f + (float)(byte - 128) / 512.0f);
    }
}

// Streaming-read probe for `mkc bench`: reads n 16-byte words, 4 loads in flight per thread.
extern "C" __global__ void k_read_bw(const uint4* p, unsigned long long n, unsigned* sink) {
    unsigned acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
        acc ^= a.x ^ b.y ^ c.z ^ d.w;
    }
    for (; i < n; i += stride) acc ^= __ldcs(p + i).x;
    if (acc == 0x12345678u) *sink = acc;
}
