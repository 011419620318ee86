#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "One page loop for every matvec in k_persistent"): writes
to stdout a copy of backend/kernels/mkc.cu whose persistent kernel runs every matvec
instruction through one body, so that the page loop is inlined once instead of once per
operator. Built only where every matvec's K groups are 8 and no input is staged by chunks
(the 1B layouts); elsewhere the copy compiles to main's kernel. Run it through
`tuning.kernels_cu`.

usage: python3 tools/variants/unified.py > v_unified.cu
"""
import pathlib
import sys

src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

BODY = r'''
#if K_GROUPS_QKV_ROPE == 8 && K_GROUPS_O_PROJ == 8 && K_GROUPS_UP_GATE == 8 && K_GROUPS_DOWN == 8 && \
    K_GROUPS_LM_HEAD == 8 && X_LEN_O_PROJ == 0 && X_LEN_DOWN == 0
#define MKC_UNIFIED 1
// Every matvec operator's epilogue, chosen per page by the instruction's operator.
struct AnyEpilogue {
    int op;
    const Model& m;
    const Globals& g;
    const Layer& L;
    int p;
    u64 best;
    template <int R>
    __device__ void operator()(int chunk, int row0, const float (&v)[R]) {
        switch (op) {
            case OP_QKV_ROPE: {
                QkvEpilogue e{m, g, L, p};
                e(chunk, row0, v);
                break;
            }
            case OP_O_PROJ: {
                PartialEpilogue e{L.o_part, m.hidden};
                e(chunk, row0, v);
                break;
            }
            case OP_DOWN: {
                PartialEpilogue e{L.d_part, m.hidden};
                e(chunk, row0, v);
                break;
            }
            case OP_UP_GATE: {
                UpGateEpilogue e{L};
                e(chunk, row0, v);
                break;
            }
            default: {
                LmHeadEpilogue e{g, best};
                e(chunk, row0, v);
                best = e.best;
            }
        }
    }
};

// A persistent matvec instruction of any operator: its staging, one page loop, its epilogue.
template <typename Work, typename Deps>
__device__ void matvec_body(int op, const Model& m, const Globals& g, const Layer& L, const Work& work,
                            const Deps& deps) {
    const Matvec v = op_matvec(op, m, g, L);
    Stream s = work.stream(0, 0, 0);
    int first, count;
    page_range(work, v, first, count);
    deps.issued();
    mark(MARK_ISSUED);
    deps.wait();
    mark(MARK_RELEASED);
#ifdef MKC_ABLATE_LOADS
    if (op_norm(op, g, L)) mbar_wait(s.norm_bar, s.norm_parity);
#else
    if (op == OP_QKV_ROPE) {
        int lo, hi;
        residual_share(work, v, m.hidden, lo, hi);
        stage_layer_input(s, m, g, L, lo, hi);
    } else if (op == OP_UP_GATE) {
        int lo, hi;
        residual_share(work, v, m.hidden, lo, hi);
        stage_sum(s.x, L.x_in, L.o_part, m.s_attn, m.hidden, L.x_mid, lo, hi, &s, m.eps);
    } else if (op == OP_LM_HEAD) {
        stage_sum(s.x, g.final_mid, g.final_part, m.s_down, m.hidden, nullptr, 0, 0, &s, m.eps);
    }
#endif
    consumers_sync();
    mark(MARK_PREPARED);
    const float* x = op == OP_O_PROJ ? L.attn : op == OP_DOWN ? L.h : s.x;
    AnyEpilogue ep{op, m, g, L, *g.pos, 0};
    consume<8>(s, v, x, first, count, ep);
    mark(MARK_COMPUTED);
    if (op == OP_LM_HEAD && threadIdx.x % 32 == 0 && ep.best) atomicMax(&g.tokens[*g.pos + 1], ep.best);
}
#endif

'''

anchor = 'extern "C" __global__ void __launch_bounds__(PERSISTENT_THREADS, 1) k_persistent('
assert src.count(anchor) == 1, "k_persistent's signature moved"
src = src.replace(anchor, BODY + anchor)

switch = "        switch (op) {\n            case OP_QKV_ROPE:\n                qkv_rope_body(m, g, L, w, d);"
assert src.count(switch) == 1, "k_persistent's switch moved"
src = src.replace(
    switch,
    "#ifdef MKC_UNIFIED\n        if (op != OP_ATTENTION) matvec_body(op, m, g, L, w, d);\n        else\n#endif\n" + switch,
)
sys.stdout.write(src)
