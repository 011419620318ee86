//! The kernels' parameter structs, field for field (`Model`, `Globals`, `Layer` in mkc.cu).

/// The kernels' `Model` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct KModel {
    pub(super) hidden: i32,
    pub(super) inter: i32,
    pub(super) q_dim: i32,
    pub(super) kv_dim: i32,
    pub(super) heads: i32,
    pub(super) kv_heads: i32,
    pub(super) head_dim: i32,
    pub(super) vocab: i32,
    pub(super) layers: i32,
    pub(super) attn_split: i32,
    pub(super) s_attn: i32,
    pub(super) s_down: i32,
    pub(super) max_seq: i32,
    pub(super) eps: f32,
    pub(super) log2_theta: f32,
    /// Ring slots per consumer warp per operator kind, in `ENTRY_POINTS` order.
    pub(super) ring: [i32; 6],
    /// KV positions per chunk of the folded attention + O-projection grid (0: cannot fold).
    pub(super) fold_chunk: i32,
}

/// The kernels' `Globals` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KGlobals {
    pub(super) embed: u64,
    pub(super) lm_head: u64,
    pub(super) final_norm: u64,
    pub(super) tokens: u64,
    pub(super) pos: u64,
    pub(super) logits: u64,
    pub(super) final_mid: u64,
    pub(super) final_part: u64,
}

/// The kernels' `Layer` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct KLayer {
    pub(super) w_qkv: u64,
    pub(super) w_o: u64,
    pub(super) w_gate: u64,
    pub(super) w_up: u64,
    pub(super) w_down: u64,
    pub(super) norm1: u64,
    pub(super) norm2: u64,
    pub(super) k_cache: u64,
    pub(super) v_cache: u64,
    pub(super) prev_mid: u64,
    pub(super) prev_part: u64,
    pub(super) x_in: u64,
    pub(super) qkv: u64,
    pub(super) attn: u64,
    pub(super) o_part: u64,
    pub(super) x_mid: u64,
    pub(super) h: u64,
    pub(super) d_part: u64,
}
