#!/usr/bin/env python3
"""Variant (experiment, docs/perf.md "Staging the fragments directly"): writes to stdout a copy of
backend/kernels/mkc.cu whose staged operators on the tensor cores (QKV after layer 0, up/gate,
the LM head) write their input's fragments straight from `stage_sum`'s registers, where main
stores the normalised floats, passes a barrier, and then has `stage_fragments` read them back
and rewrite them between two more barriers. A `prepare` now says whether it staged fragments
(QKV's layer 0, whose embedding row is normalised in place by `rmsnorm_consumers`, does not,
and keeps the rewrite).

usage: python3 tools/variants/direct_fragments.py > v_direct.cu
"""
import pathlib
import sys

assert sys.argv[1:] == [], __doc__
src = (pathlib.Path(__file__).resolve().parents[2] / "backend/kernels/mkc.cu").read_text()

edits = [
    # stage_sum stores fragments when asked
    ("__device__ void stage_sum(float* dst, const float* base, const float* parts, int splits, int n, float* out,",
     "template <bool FRAGMENTS = false>\n__device__ void stage_sum(float* dst, const float* base, const float* parts, int splits, int n, float* out,"),
    ("""#pragma unroll
    for (int q = 0; q < G; ++q)
        if (at[q] < n) *reinterpret_cast<float4*>(dst + at[q]) = acc[q];
}""",
     """#pragma unroll
    for (int q = 0; q < G; ++q) {
        if (at[q] >= n) continue;
        if constexpr (FRAGMENTS) write_fragments(reinterpret_cast<unsigned*>(dst), at[q], acc[q]);
        else *reinterpret_cast<float4*>(dst + at[q]) = acc[q];
    }
}

// Whether an operator's staged input is the tensor-core loop's fragments.
#define STAGES_FRAGMENTS(K_GROUPS) (K_GROUPS == TENSOR_CORE_K_GROUPS && PAGE_BYTES == TENSOR_CORE_PAGE_BYTES)"""),
    # stage_layer_input returns whether it staged fragments
    ("__device__ void stage_layer_input(const Stream& s, const Model& m, const Globals& g, const Layer& L, int lo, int hi) {\n    if (L.prev_mid) {\n        stage_sum(s.x, L.prev_mid, L.prev_part, m.s_down, m.hidden, L.x_in, lo, hi, &s, m.eps);\n        return;\n    }",
     "__device__ bool stage_layer_input(const Stream& s, const Model& m, const Globals& g, const Layer& L, int lo, int hi) {\n    if (L.prev_mid) {\n        stage_sum<STAGES_FRAGMENTS(K_GROUPS_QKV_ROPE)>(s.x, L.prev_mid, L.prev_part, m.s_down, m.hidden, L.x_in, lo, hi, &s, m.eps);\n        return STAGES_FRAGMENTS(K_GROUPS_QKV_ROPE);\n    }"),
    ("    consumers_sync();\n    rmsnorm_consumers(s, m.hidden, m.eps);\n}",
     "    consumers_sync();\n    rmsnorm_consumers(s, m.hidden, m.eps);\n    return false;\n}"),
    ("        stage_layer_input(s, m, g, L, lo, hi);\n    };",
     "        return stage_layer_input(s, m, g, L, lo, hi);\n    };"),
    ("        if (X_LEN_O_PROJ > 0) stage_chunks(s, work, v, L.attn);\n    };",
     "        if (X_LEN_O_PROJ > 0) stage_chunks(s, work, v, L.attn);\n        return false;\n    };"),
    ("        if (X_LEN_DOWN > 0) stage_chunks(s, work, v, L.h);\n    };",
     "        if (X_LEN_DOWN > 0) stage_chunks(s, work, v, L.h);\n        return false;\n    };"),
    ("        stage_sum(s.x, L.x_in, L.o_part, m.s_attn, m.hidden, L.x_mid, lo, hi, &s, m.eps);\n    };",
     "        stage_sum<STAGES_FRAGMENTS(K_GROUPS_UP_GATE)>(s.x, L.x_in, L.o_part, m.s_attn, m.hidden, L.x_mid, lo, hi, &s, m.eps);\n        return STAGES_FRAGMENTS(K_GROUPS_UP_GATE);\n    };"),
    ("        stage_sum(s.x, g.final_mid, g.final_part, m.s_down, m.hidden, nullptr, 0, 0, &s, m.eps);\n    };",
     "        stage_sum<STAGES_FRAGMENTS(K_GROUPS_LM_HEAD)>(s.x, g.final_mid, g.final_part, m.s_down, m.hidden, nullptr, 0, 0, &s, m.eps);\n        return STAGES_FRAGMENTS(K_GROUPS_LM_HEAD);\n    };"),
    # run_stream skips the rewrite where prepare staged fragments
    ("    prepare(s);\n#endif",
     "    staged_fragments = prepare(s);\n#endif"),
    ("#ifdef MKC_ABLATE_LOADS\n    (void)prepare;\n#else\n    staged_fragments",
     "    bool staged_fragments = false;\n#ifdef MKC_ABLATE_LOADS\n    (void)prepare;\n#else\n    staged_fragments"),
    ("    if constexpr (MMA && !X_GLOBAL) stage_fragments(s.x, x_len);",
     "    if constexpr (MMA && !X_GLOBAL)\n        if (!staged_fragments) stage_fragments(s.x, x_len);"),
]
for old, new in edits:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
sys.stdout.write(src)
