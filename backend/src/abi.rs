//! The kernels' parameter structs (`Model`, `Globals`, `Layer`), described once, here: each
//! is a `repr(C)` Rust struct and, generated from the same description, the C declaration
//! that [`header`] prepends to the NVRTC source with `static_assert`s of every field's offset
//! and the struct's size as Rust lays them out. A field added, removed or reordered on one side
//! only cannot compile, so there is no hand mirror to drift.

/// Declares a `repr(C)` struct and its C twin: `Rust = "C declaration"` per field.
macro_rules! abi_struct {
    ($(#[$doc:meta])* $name:ident as $c:literal { $($field:ident : $ty:ty = $decl:literal,)* }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name {
            $(#[doc = $decl] pub $field: $ty,)*
        }

        impl $name {
            /// The C declaration of this struct and the checks of its layout against Rust's.
            pub fn c_declaration() -> String {
                let mut s = format!("struct {} {{\n", $c);
                $(s += &format!("    {};\n", $decl);)*
                s += "};\n";
                s += &format!(
                    "static_assert(sizeof({}) == {}, \"{} differs between Rust and CUDA\");\n",
                    $c, std::mem::size_of::<$name>(), $c
                );
                // NVRTC has no offsetof; __INTADDR__ is its front end's constant address.
                $(s += &format!(
                    "static_assert(__INTADDR__(&((({}*)0)->{})) == {}, \"{}.{} differs between \
                     Rust and CUDA\");\n",
                    $c, stringify!($field), std::mem::offset_of!($name, $field), $c,
                    stringify!($field)
                );)*
                s
            }
        }
    };
}

abi_struct! {
    /// The kernels' `Model` struct: the geometry every kernel reads.
    KModel as "Model" {
        hidden: i32 = "int hidden",
        inter: i32 = "int inter",
        q_dim: i32 = "int q_dim",
        kv_dim: i32 = "int kv_dim",
        heads: i32 = "int heads",
        kv_heads: i32 = "int kv_heads",
        head_dim: i32 = "int head_dim",
        vocab: i32 = "int vocab",
        layers: i32 = "int layers",
        attn_split: i32 = "int attn_split",
        s_attn: i32 = "int s_attn",
        s_down: i32 = "int s_down",
        max_seq: i32 = "int max_seq",
        eps: f32 = "float eps",
    }
}

impl KModel {
    /// The geometry `model`'s kernels read: every kernel's and probe's one description of it.
    pub fn of(model: &mkc_ir::Model) -> KModel {
        let g = &model.geometry;
        let l = &model.lowering;
        KModel {
            hidden: g.hidden as i32,
            inter: g.intermediate as i32,
            q_dim: model.q_dim() as i32,
            kv_dim: model.kv_dim() as i32,
            heads: g.heads as i32,
            kv_heads: g.kv_heads as i32,
            head_dim: g.head_dim as i32,
            vocab: g.vocab as i32,
            layers: g.layers as i32,
            attn_split: l.attention_split as i32,
            // The O-projection's K chunks (attention's shards, or with attention inside it
            // one per attention task).
            s_attn: mkc_ir::work::matvec(model, mkc_ir::OpKind::OProj).map_or(1, |w| w.splits)
                as i32,
            s_down: l.vtp_shards.up_gate_down as i32,
            max_seq: model.workload.max_seq_len as i32,
            eps: g.norm_eps as f32,
        }
    }
}

abi_struct! {
    /// The kernels' `Globals` struct: buffers outside the layers.
    KGlobals as "Globals" {
        embed: u64 = "const bf16* embed",
        lm_head: u64 = "const bf16* lm_head",
        final_norm: u64 = "const bf16* final_norm",
        tokens: u64 = "u64* tokens",
        pos: u64 = "const int* pos",
        logits: u64 = "float* logits",
        final_mid: u64 = "const float* final_mid",
        final_part: u64 = "const float* final_part",
    }
}

abi_struct! {
    /// The kernels' `Layer` struct: one decoder layer's weights and buffers.
    KLayer as "Layer" {
        w_qkv: u64 = "const bf16* w_qkv",
        w_o: u64 = "const bf16* w_o",
        w_gate_up: u64 = "const bf16* w_gate_up",
        w_down: u64 = "const bf16* w_down",
        norm1: u64 = "const bf16* norm1",
        norm2: u64 = "const bf16* norm2",
        k_cache: u64 = "bf16* k_cache",
        v_cache: u64 = "bf16* v_cache",
        prev_mid: u64 = "const float* prev_mid",
        prev_part: u64 = "const float* prev_part",
        x_in: u64 = "float* x_in",
        qkv: u64 = "float* qkv",
        attn: u64 = "float* attn",
        o_part: u64 = "float* o_part",
        x_mid: u64 = "float* x_mid",
        h: u64 = "float* h",
        d_part: u64 = "float* d_part",
        // Unused: keeps the struct whole 16-byte words, which the persistent kernel stages
        // with cp.async.
        pad: u64 = "unsigned long long pad",
    }
}

abi_struct! {
    /// One instruction of the persistent kernel: a run of tasks of one operator, with its
    /// waits and signals as ranges of the plan's counter references.
    KInstr as "Instr" {
        op: i32 = "int op",
        layer: i32 = "int layer",
        first: i32 = "int first",
        count: i32 = "int count",
        wait0: i32 = "int wait0",
        waits: i32 = "int waits",
        // Always wait0 + waits: the kernel stages waits and signals as one range.
        signal0: i32 = "int signal0",
        signals: i32 = "int signals",
    }
}

abi_struct! {
    /// A counter an instruction waits on (amount: signals per step) or signals (amount: how
    /// much it adds).
    KCounterRef as "CounterRef" {
        counter: i32 = "int counter",
        amount: i32 = "int amount",
    }
}

abi_struct! {
    /// The persistent kernel's plan and state: per-SM instruction ranges, the monotonic
    /// counters, its own launch count, the watchdog's stall record, and (traced builds only,
    /// null otherwise) one phase record of `TRACE_SLOTS` per instruction.
    KPersistent as "Persistent" {
        layers: u64 = "const Layer* layers",
        instrs: u64 = "const Instr* instrs",
        refs: u64 = "const CounterRef* refs",
        stream_start: u64 = "const int* stream_start",
        counters: u64 = "unsigned* counters",
        epoch: u64 = "unsigned* epoch",
        exited: u64 = "unsigned* exited",
        stall: u64 = "unsigned long long* stall",
        watchdog_ns: u64 = "unsigned long long watchdog_ns",
        trace: u64 = "unsigned long long* trace",
    }
}

/// The persistent kernel's operator id of `kind`: its index in the catalogue's entry points
/// (the kernels' `OP_*`, and the index of its ring slots in `Model::ring`).
pub fn op_id(kind: mkc_ir::OpKind) -> i32 {
    mkc_catalogue::ENTRY_POINTS
        .iter()
        .position(|(_, k)| *k == kind)
        .expect("every operator has an entry point") as i32
}

/// The slots of one CTA's phase trace (`mkc bench --cta-phases`), described once: the kernels
/// get them as the C enum `MARK_*` and `TRACE_SLOTS` from [`header`]. Clock marks are
/// `clock64()`; `Sm` is the SM id; `EntryNs` and `ExitNs` are `%globaltimer`. A mark a kernel
/// does not record is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Clock at entry.
    Entry,
    /// The independent loads are issued.
    Issued,
    /// The grid-dependency wait released.
    Released,
    /// The input vector is prepared.
    Prepared,
    /// The weights have landed.
    Landed,
    /// The work is computed.
    Computed,
    /// Clock at exit.
    Exit,
    /// The SM the CTA ran on.
    Sm,
    /// Global time at entry, ns.
    EntryNs,
    /// Global time at exit, ns.
    ExitNs,
    /// A finer mark inside a phase: the partial sums landed and normalised.
    Sub1,
    /// A second finer mark: attention's scores and softmax done.
    Sub2,
    /// A persistent instruction's consumers passed their end barrier: from here to its exit
    /// mark is thread 0's signals' release, which every successor waits for (0.5-3.3 µs per
    /// instruction on a held H100, docs/perf.md lease AN).
    Ended,
}

impl Mark {
    /// Every mark, in slot order.
    pub const ALL: [Mark; 13] = [
        Mark::Entry,
        Mark::Issued,
        Mark::Released,
        Mark::Prepared,
        Mark::Landed,
        Mark::Computed,
        Mark::Exit,
        Mark::Sm,
        Mark::EntryNs,
        Mark::ExitNs,
        Mark::Sub1,
        Mark::Sub2,
        Mark::Ended,
    ];

    /// Its slot in a CTA's trace.
    pub const fn slot(self) -> usize {
        self as usize
    }

    /// Its name in the kernels (`MARK_ENTRY`, ...).
    pub fn c_name(self) -> String {
        let rust = format!("{self:?}");
        let mut c = String::from("MARK");
        for ch in rust.chars() {
            if ch.is_ascii_uppercase() {
                c.push('_');
            }
            c.push(ch.to_ascii_uppercase());
        }
        c
    }
}

/// Where `k_page_math` (`mkc probe pages`) takes its page loop's input from, and so which loop
/// it times; the kernels get it as the C enum `PAGE_INPUT_*` from [`header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageInput {
    /// The FMA loop, the warp's input slice loaded from L2 before the timed span.
    Registers,
    /// The FMA loop, the slice loaded inside the span (as the O-projection and down do after
    /// their wait).
    L2InSpan,
    /// The tensor-core loop (4-row pages of 2,048 columns only): its input's fragments written
    /// to shared memory before the span, as a staged input's are, loaded inside it.
    TensorCores,
}

impl PageInput {
    /// Every placement, in value order.
    pub const ALL: [PageInput; 3] = [
        PageInput::Registers,
        PageInput::L2InSpan,
        PageInput::TensorCores,
    ];

    /// The value `k_page_math` takes.
    pub const fn value(self) -> i32 {
        self as i32
    }

    /// Its name in the kernels (`PAGE_INPUT_REGISTERS`, ...).
    pub fn c_name(self) -> &'static str {
        match self {
            PageInput::Registers => "PAGE_INPUT_REGISTERS",
            PageInput::L2InSpan => "PAGE_INPUT_L2_IN_SPAN",
            PageInput::TensorCores => "PAGE_INPUT_TENSOR_CORES",
        }
    }
}

/// Slots per CTA in a phase trace (the kernels' `TRACE_SLOTS`).
pub const TRACE_SLOTS: usize = Mark::ALL.len();

/// One parameter of an operator kernel, in the order the kernels declare them and the host
/// passes them: the kernels get the lists as `OP_PARAMS` and `PAIR_PARAMS` from [`header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// The geometry (`Model m`).
    Model,
    /// Buffers outside the layers (`Globals g`).
    Globals,
    /// The grid's layer (`Layer L`).
    Layer,
    /// 1: the grid calls `griddepcontrol.wait` (`int pdl`).
    Pdl,
    /// 1: it triggers its successor right after issuing its loads (`int early`).
    Early,
    /// Its CTA trace buffer, or null (`u64* trace`).
    Trace,
}

impl Param {
    /// Its C declaration.
    pub fn c_declaration(self) -> &'static str {
        match self {
            Param::Model => "Model m",
            Param::Globals => "Globals g",
            Param::Layer => "Layer L",
            Param::Pdl => "int pdl",
            Param::Early => "int early",
            Param::Trace => "u64* trace",
        }
    }
}

/// The parameters of a grid that runs one operator.
pub const OP_PARAMS: &[Param] = &[
    Param::Model,
    Param::Globals,
    Param::Layer,
    Param::Pdl,
    Param::Early,
    Param::Trace,
];

/// The line of `backend/kernels/mkc.cu` that [`header`] replaces.
pub const MARKER: &str = "// @MKC_ABI: generated by backend/src/abi.rs@";

/// The columns of a page row the kernels' page loop is compiled for (`consume<K>`, generated
/// as `K_COLS_*`): the K chunk's own where the kernels stream it (`mkc_catalogue::streamable_k`:
/// whole 16-byte pieces, in registers up to 2,048 columns, longer ones block by block from the
/// input staged in shared memory); a chunk the kernels cannot stream gets [`K_COLS_UNRUN`],
/// since such a model is refused before anything launches (`mkc_catalogue::check_model`).
pub fn k_cols(k: u32) -> u32 {
    if mkc_catalogue::streamable_k(k) {
        k
    } else {
        K_COLS_UNRUN
    }
}

/// The 256-column groups of the page loop for a K chunk of `k` columns (the lanes' 16-byte
/// pieces in rounds of 32; the last round partial where `k` is no multiple of 256): what
/// `k_page_math` records as the loop it ran.
pub fn k_groups(k: u32) -> u32 {
    k_cols(k).div_ceil(256)
}

/// The page loop a build compiles for an operator whose K chunk the kernels cannot stream.
pub const K_COLS_UNRUN: u32 = 2048;

/// [`header`] for `model`: also RoPE's frequency per head pair (`rope_freq_table`, from
/// `Model::rope_freq`) and attention's score scale (`ATT_SCALE`, from
/// `Model::attention_scale`), the values the CPU reference uses.
pub fn model_header(model: &mkc_ir::Model) -> String {
    let mut s = header(model.lowering.page_bytes);
    // The residual stream's width: what `stage_sum` stages per thread.
    s += &format!("#define HIDDEN {}\n", model.geometry.hidden);
    // Split-KV attention: the parts a history is dealt over and the floats of one partial
    // record (mkc_ir::work), which attention writes and the O-projection merges.
    s += &format!(
        "#define ATT_KV_SPLIT {}\n#define ATT_PART_RECORD {}\n",
        model.lowering.kv_parts(),
        mkc_ir::work::attention_part_record(model.geometry.head_dim)
    );
    // Attention inside the O-projection (`lowering.attention_in_o_proj`): QKV zeroes the one
    // vector the O-projection adds into, and up/gate stages that vector alone.
    s += &format!(
        "#define O_ATTENTION {}\n",
        u32::from(model.lowering.attention_in_o_proj.is_some())
    );
    // The O-projection's K chunk in columns: the row length of the page loop in which each
    // lane owns whole rows (`consume_narrow`), as `k_page_math` times it.
    let o_k = mkc_ir::work::matvec(model, mkc_ir::OpKind::OProj).map_or(0, |w| w.k);
    s += &format!("#define O_PROJ_K {o_k}\n");
    // Pages per task and rows per page of each matvec (`mkc_ir::work`), the 256-column groups
    // of its K chunk (the one page loop its body compiles) and the ring slots of its chain
    // kernel (`mkc_catalogue::Stream::slots`), as constants the compiler folds.
    for kind in mkc_ir::work::MATVECS {
        let work = mkc_ir::work::matvec(model, kind);
        let pages = work.as_ref().map_or(1, |w| w.task_pages);
        let rows = work.as_ref().map_or(1, |w| w.page_rows());
        let cols = work.as_ref().map_or(K_COLS_UNRUN, |w| k_cols(w.k));
        let slots = mkc_catalogue::stream(model, kind).map_or(1, |st| st.slots());
        // The floats of its input staged in shared memory (mkc_catalogue::staged_input): the
        // bodies that may read global memory instead (the O-projection, down) stage where it
        // is not 0, and size their stream by it.
        let staged = work
            .as_ref()
            .map_or(0, |w| mkc_catalogue::staged_input(model, kind, w));
        let name = kind.name().to_ascii_uppercase();
        s += &format!(
            "#define TASK_PAGES_{name} {pages}\n#define PAGE_ROWS_{name} {rows}\n#define K_COLS_{name} {cols}\n#define RING_SLOTS_{name} {slots}\n#define X_LEN_{name} {staged}\n"
        );
    }
    // Whether attention's output and h are stored as tensor-core fragments for the
    // O-projection and down (mkc_catalogue::fragment_input).
    for (name, kind) in [
        ("ATTN_FRAGMENTS", mkc_ir::OpKind::OProj),
        ("H_FRAGMENTS", mkc_ir::OpKind::Down),
    ] {
        let on = mkc_catalogue::fragment_input(model, kind);
        s += &format!("#define {name} {}\n", u32::from(on));
    }
    // The persistent kernel's shared-memory layout (where it can run the model).
    if let Ok(l) = mkc_catalogue::persistent_layout(model) {
        for (name, v) in [
            ("SLOTS", l.slots),
            ("X_LEN", l.x_len),
            ("WORK_OFFSET", l.work_offset()),
            ("WORK_BYTES", l.work_bytes),
            ("RING_OFFSET", l.ring_offset()),
            ("ATT_OFFSET", l.att_offset()),
            ("ATT_BYTES", l.att_bytes()),
            (
                "BOUNDARY_INFLIGHT",
                mkc_catalogue::persistent_boundary_inflight(&model.tuning),
            ),
            (
                "STREAM_INFLIGHT",
                mkc_catalogue::persistent_stream_inflight(&model.tuning),
            ),
            (
                "WARM_PAGES",
                mkc_catalogue::persistent_warm_pages(&model.tuning),
            ),
            ("WARM_INFLIGHT", mkc_catalogue::PERSISTENT_WARM_INFLIGHT),
            (
                "WARM_BARS_OFFSET",
                mkc_catalogue::PersistentLayout::WARM_BARS_OFFSET,
            ),
            ("SINK_OFFSET", l.sink_offset()),
            ("SINK_BYTES", l.sink_bytes),
        ] {
            s += &format!("#define PERSISTENT_{name} {v}\n");
        }
    }
    let freqs: Vec<String> = (0..model.geometry.head_dim / 2)
        .map(|p| format!("{:e}f", model.rope_freq(p)))
        .collect();
    s += &format!(
        "__device__ const float rope_freq_table[{}] = {{{}}};\n",
        freqs.len(),
        freqs.join(", ")
    );
    // Attention's score scale, the checkpoint's 1/sqrt(head width).
    s += &format!("#define ATT_SCALE {:e}f\n", model.attention_scale());
    s
}

/// The generated constants (the model's page size, ring slots, default warp and thread counts,
/// trace slots) and declarations of every parameter struct, with their layout checks.
pub fn header(page_bytes: u32) -> String {
    use crate::kernels::{ATT_THREADS, CONSUMER_WARPS, MAX_SLOTS};
    let mut s = String::from(
        "// Generated by mkc (backend/src/abi.rs): constants and parameter structs as Rust has\n\
         // them. CONSUMER_WARPS and ATT_THREADS are defaults the build may override with -D.\n",
    );
    s += &format!("#define PAGE_BYTES {page_bytes}\n#define MAX_SLOTS {MAX_SLOTS}\n");
    s += &format!(
        "#define PERSISTENT_MAX_REFS {}\n",
        mkc_catalogue::PERSISTENT_MAX_REFS
    );
    s += &format!("#ifndef CONSUMER_WARPS\n#define CONSUMER_WARPS {CONSUMER_WARPS}\n#endif\n");
    s += &format!("#ifndef ATT_THREADS\n#define ATT_THREADS {ATT_THREADS}\n#endif\n");
    s += &format!("#define TRACE_SLOTS {TRACE_SLOTS}\nenum {{");
    let marks: Vec<String> = Mark::ALL
        .iter()
        .map(|m| format!(" {} = {}", m.c_name(), m.slot()))
        .collect();
    s += &marks.join(",");
    s += " };\n";
    s += &format!(
        "#define TENSOR_CORE_K {}\n#define TENSOR_CORE_ROWS {}\n#define MAX_PAGE_ROWS {}\n",
        mkc_catalogue::REGISTER_K,
        mkc_catalogue::TENSOR_CORE_ROWS,
        mkc_catalogue::MAX_PAGE_ROWS
    );
    let inputs: Vec<String> = PageInput::ALL
        .iter()
        .map(|p| format!(" {} = {}", p.c_name(), p.value()))
        .collect();
    s += &format!("enum {{{} }};\n", inputs.join(","));
    let ops: Vec<String> = mkc_catalogue::ENTRY_POINTS
        .iter()
        .map(|(_, k)| format!(" OP_{} = {}", k.name().to_ascii_uppercase(), op_id(*k)))
        .collect();
    s += &format!("enum {{{} }};\n", ops.join(","));
    for decl in [
        KModel::c_declaration(),
        KGlobals::c_declaration(),
        KLayer::c_declaration(),
        KInstr::c_declaration(),
        KCounterRef::c_declaration(),
        KPersistent::c_declaration(),
    ] {
        s += &decl;
    }
    let decls: Vec<&str> = OP_PARAMS.iter().map(|p| p.c_declaration()).collect();
    s += &format!("#define OP_PARAMS {}\n", decls.join(", "));
    s
}

/// The line at the end of `backend/kernels/mkc.cu` that [`model_checks`] replaces.
pub const CHECKS_MARKER: &str = "// @MKC_CHECKS: generated by backend/src/abi.rs@";

/// `static_assert`s that the kernels' layout rules (`ring_offset`,
/// `kv_chunk_of`, all `constexpr` in the source) give what the catalogue computes for `model`:
/// NVRTC refuses a build in which Rust and CUDA disagree, naming the rule and the operator.
pub fn model_checks(model: &mkc_ir::Model) -> String {
    use mkc_catalogue::{attention_chunk, dynamic_smem, stream};
    let mut s = String::from(
        "// Generated by mkc (backend/src/abi.rs): the catalogue's layout.
",
    );
    for kind in mkc_ir::work::MATVECS {
        let Some(st) = stream(model, kind) else {
            continue;
        };
        let name = kind.name();
        s += &format!(
            "static_assert(ring_offset({}) == {}, \"Rust and CUDA disagree on the ring offset of {name}\");\n",
            st.x_len,
            st.ring_offset()
        );
    }
    s += &rule_checks(model);
    let g = &model.geometry;
    let outs = model.heads_per_attention_task() * g.head_dim;
    if let Ok(l) = mkc_catalogue::persistent_layout(model) {
        s += &format!(
            "#ifdef MKC_PERSISTENT\n\
             static_assert(kv_chunk_apart({att_bytes}u, {hd}) == {chunk}, \"Rust and CUDA disagree on the persistent attention's KV chunk\");\n\
             static_assert(({hp} * {hd} + {hp} * att_part_max({max_seq})) * 4 <= PERSISTENT_ATT_OFFSET - PERSISTENT_WORK_OFFSET, \"the persistent attention's q and scores overflow the input vector's region\");\n\
             static_assert(PERSISTENT_RING_OFFSET % 128 == 0 && PERSISTENT_WORK_OFFSET % 128 == 0 && PERSISTENT_ATT_OFFSET % 128 == 0, \"the persistent ring, work region and attention region must be 128-byte aligned\");\n\
             static_assert(CONSUMER_WARPS == {warps}, \"Rust and CUDA disagree on the persistent kernel's consumer warps\");\n\
             static_assert(PERSISTENT_SLOTS <= MAX_SLOTS, \"the persistent ring has more slots than barriers\");\n\
             static_assert(PERSISTENT_WARM_BARS_OFFSET == 2 * MAX_SLOTS * 8 + 2 * 8 && PERSISTENT_SINK_OFFSET >= PERSISTENT_WARM_BARS_OFFSET + PERSISTENT_WARM_INFLIGHT * 8 && PERSISTENT_SINK_OFFSET + PERSISTENT_SINK_BYTES <= PERSISTENT_WORK_OFFSET && (PERSISTENT_WARM_PAGES == 0 || (PERSISTENT_SINK_BYTES >= 16 && PERSISTENT_SINK_BYTES % 16 == 0)), \"the persistent warm reads' barriers and sink overlap another region\");\n\
             static_assert(att_slices(CONSUMER_THREADS, {outs}) * {outs} * 4 <= {att_bytes}u, \"the persistent attention's partial sums overflow its region\");\n\
             static_assert(att_slices(CONSUMER_THREADS, {outs}) * {outs} * 4 == {reduce}u, \"Rust and CUDA disagree on the persistent attention's partial sums\");\n\
             #endif\n",
            hp = model.heads_per_attention_task(),
            hd = g.head_dim,
            max_seq = model.workload.max_seq_len,
            chunk = l.attention_chunk(model),
            att_bytes = l.att_bytes(),
            warps = l.warps,
            reduce = mkc_catalogue::attention_reduce_smem(model, l.warps * 32),
        );
        // Which warp consumes which page of the persistent ring (its slots need not be a
        // multiple of its warps).
        s += &format!(
            "#ifdef MKC_PERSISTENT\n{}#endif\n",
            ring_checks(l.slots, l.warps, "the persistent kernel")
        );
    }
    let att_smem = dynamic_smem(model, mkc_ir::OpKind::Attention);
    s += &format!(
        "static_assert(att_slices(ATT_THREADS, {outs}) * {outs} * 4 <= {att_smem}u, \"attention's partial sums overflow its shared memory\");\n\
         static_assert(att_slices(ATT_THREADS, {outs}) * {outs} * 4 == {reduce}u, \"Rust and CUDA disagree on attention's partial sums\");\n",
        reduce = mkc_catalogue::attention_reduce_smem(model, mkc_catalogue::att_threads(&model.tuning)),
    );
    s += &format!(
        "static_assert(kv_chunk_of({att_smem}u, {}, {}, att_part_max({})) == {}, \"Rust and CUDA disagree on attention's KV chunk\");\n",
        model.heads_per_attention_task(),
        g.head_dim,
        model.workload.max_seq_len,
        attention_chunk(model)
    );
    s += &format!(
        "static_assert(att_part_max({}) == {}, \"Rust and CUDA disagree on the positions of an attention part\");\n",
        model.workload.max_seq_len,
        mkc_catalogue::attention_part_positions(model)
    );
    s
}

/// Checks of the ring's slot, lap, consumer warp and each warp's next page (`ring_slot_of`,
/// `ring_lap_of`, `ring_owner_of`, `ring_next_of`) against the catalogue's, for a ring of
/// `slots` slots and `warps` consumer warps, at pages around its laps' edges.
fn ring_checks(slots: u32, warps: u32, what: &str) -> String {
    use mkc_catalogue::{ring_next, ring_owner, ring_slot};
    let mut s = String::new();
    let pages = [
        0,
        1,
        warps - 1,
        warps,
        slots - 1,
        slots,
        slots + warps,
        3 * slots + 1,
        3 * slots + warps / 2,
        5 * slots + warps + 2,
        7 * slots + 5,
    ];
    for i in pages {
        let (slot, lap) = ring_slot(i, slots);
        let mut checks = vec![
            (format!("ring_slot_of({i}, {slots})"), slot as i64),
            (format!("ring_lap_of({i}, {slots})"), lap as i64),
            (
                format!("ring_owner_of({i}, {slots})"),
                ring_owner(i, slots, warps) as i64,
            ),
        ];
        for warp in 0..warps {
            let next = ring_next(i, slots, warps, warp).map_or(1 << 30, |n| n as i64);
            checks.push((format!("ring_next_of({i}, {slots}, {warp})"), next));
        }
        for (expr, want) in checks {
            s += &format!(
                "static_assert({expr} == {want}, \"Rust and CUDA disagree on the ring slot of page {i} of {what}\");\n"
            );
        }
    }
    s
}

/// Checks of the kernels' other `constexpr` rules against the catalogue's, at the values this
/// model's build uses: the build's warp count and warming depth, every stream's byte offsets,
/// the CTA task runs and residual shares of every matvec (at the grids of 1 CTA, 132 CTAs and
/// one per task, and a prime in between), and the ring and warming slots of every stream.
fn rule_checks(model: &mkc_ir::Model) -> String {
    use mkc_catalogue::{consumer_warps, cta_tasks, stream, warm_depth, warm_slot};
    let mut s = String::new();
    let mut s_ring = String::new();
    let mut check = |expr: String, want: i64, what: &str| {
        s += &format!(
            "static_assert({expr} == {want}, \"Rust and CUDA disagree on the {what}\");\n"
        );
    };
    let t = &model.tuning;
    let warps = consumer_warps(t);
    let depth = warm_depth(t);
    check("CONSUMER_WARPS".into(), warps as i64, "consumer warps");
    check("WARM_DEPTH".into(), depth as i64, "warming depth");
    check(
        "empty_offset()".into(),
        mkc_catalogue::Stream::EMPTY_OFFSET as i64,
        "empty barriers' offset",
    );
    check(
        "x_offset()".into(),
        mkc_catalogue::Stream::X_OFFSET as i64,
        "input vector's offset",
    );
    let hidden = model.geometry.hidden;
    for kind in mkc_ir::work::MATVECS {
        let Some(st) = stream(model, kind) else {
            continue;
        };
        let name = kind.name();
        let x = st.x_len;
        check(
            format!("scratch_offset({x})"),
            st.scratch_offset() as i64,
            &format!("scratch offset of {name}"),
        );
        let tasks = st.work.tasks();
        let mut grids = vec![1, 97.min(tasks), 132.min(tasks), tasks];
        grids.dedup();
        for g in grids {
            for b in [0, g / 2, g - 1] {
                let (first, count) = cta_tasks(tasks, g, b);
                let what = format!("task run of CTA {b} of {g} of {name}");
                check(format!("run_start({b}, {tasks}, {g})"), first as i64, &what);
                check(
                    format!("run_start({}, {tasks}, {g})", b + 1),
                    (first + count) as i64,
                    &what,
                );
                check(
                    format!("run_start32({b}u, {tasks}u, {g}u)"),
                    first as i64,
                    &what,
                );
            }
        }
        for task in [0, 1, tasks / 3, tasks / 2, tasks - 1] {
            let (lo, hi) = mkc_ir::work::residual_share(task, tasks, hidden);
            let what = format!("residual share of task {task} of {name}");
            let groups = hidden.div_ceil(4);
            check(
                format!("share_start({task}u, {groups}u, {tasks}u, {hidden})"),
                lo as i64,
                &what,
            );
            check(
                format!("share_start({}u, {groups}u, {tasks}u, {hidden})", task + 1),
                hi as i64,
                &what,
            );
        }
        let slots = st.slots();
        s_ring += &ring_checks(slots, warps, name);
        for count in [1, warps / 2, warps - 1] {
            for n in [0, 1, 2, 5] {
                if let Some((slot, lap)) = warm_slot(count, slots, depth, n) {
                    let what = format!("warming slot {n} beside {count} pages of {name}");
                    check(
                        format!("warm_slot_of({count}, {slots}, {n})"),
                        slot as i64,
                        &what,
                    );
                    check(
                        format!("warm_lap_of({count}, {slots}, {n})"),
                        lap as i64,
                        &what,
                    );
                }
            }
        }
    }
    s + &s_ring
}

/// `source` with the marker lines replaced by [`model_header`] and [`model_checks`]; an error
/// when a marker is missing (an edited source that dropped one would otherwise compile without
/// the structs or without the layout checks).
pub fn with_header(source: &str, model: &mkc_ir::Model) -> Result<String, crate::BackendError> {
    for (marker, what) in [
        (MARKER, "the generated parameter structs"),
        (CHECKS_MARKER, "the generated layout checks"),
    ] {
        if !source.contains(marker) {
            return Err(crate::BackendError::Compile(format!(
                "the kernel source lacks the line `{marker}` where {what} go"
            )));
        }
    }
    Ok(source.replacen(MARKER, &model_header(model), 1).replacen(
        CHECKS_MARKER,
        &model_checks(model),
        1,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{compile_text, SOURCE};
    use mkc_ir::Tuning;

    #[test]
    fn trace_marks_are_one_contiguous_enum() {
        for (i, m) in Mark::ALL.iter().enumerate() {
            assert_eq!(m.slot(), i);
        }
        assert_eq!(Mark::EntryNs.c_name(), "MARK_ENTRY_NS");
        assert_eq!(Mark::Sub1.c_name(), "MARK_SUB1");
        let h = header(16384);
        assert!(
            h.contains("#define TRACE_SLOTS 13")
                && h.contains("MARK_SUB2 = 11")
                && h.contains("MARK_ENDED = 12"),
            "{h}"
        );
        // The kernels name every slot they write through the generated enum.
        for m in [
            "MARK_SM",
            "MARK_ENTRY_NS",
            "MARK_EXIT_NS",
            "MARK_SUB2",
            "MARK_ENDED",
        ] {
            assert!(SOURCE.contains(m), "{m}");
        }
    }

    /// The page-math probe's placements reach the kernel as the generated enum, each with its
    /// own value, and the kernel names every one (no number of its own).
    #[test]
    fn the_page_probe_inputs_are_generated_and_named_by_the_kernel() {
        let h = header(16384);
        let mut values: Vec<i32> = PageInput::ALL.iter().map(|p| p.value()).collect();
        values.dedup();
        assert_eq!(values.len(), PageInput::ALL.len());
        for p in PageInput::ALL {
            assert!(
                h.contains(&format!("{} = {}", p.c_name(), p.value())),
                "{h}"
            );
            assert!(SOURCE.contains(p.c_name()), "{}", p.c_name());
        }
        assert!(!SOURCE.contains("#define PAGE_INPUT_"));
    }

    #[test]
    fn every_operator_kernel_takes_the_generated_parameter_list() {
        for (name, _) in crate::kernels::ENTRY_POINTS {
            assert!(SOURCE.contains(&format!("{name}(OP_PARAMS)")), "{name}");
        }
        assert!(header(16384).contains("#define OP_PARAMS Model m, Globals g, Layer L, int pdl"));
    }

    #[test]
    fn every_field_is_declared_and_checked() {
        let h = header(16384);
        let fields = [
            "hidden",
            "max_seq",
            "final_part",
            "w_qkv",
            "d_part",
            "signal0",
            "amount",
            "epoch",
            "trace",
        ];
        for f in fields {
            assert!(h.contains(&format!("->{f})) == ")), "{f} unchecked");
        }
        // Model, Globals, Layer, Instr, CounterRef, Persistent.
        assert_eq!(h.matches("__INTADDR__").count(), 14 + 8 + 18 + 8 + 2 + 10);
        assert_eq!(h.matches("sizeof(").count(), 6);
        // The persistent kernel's operator ids are the catalogue's entry-point indices.
        for (i, (_, kind)) in mkc_catalogue::ENTRY_POINTS.iter().enumerate() {
            let id = format!("OP_{} = {i}", kind.name().to_ascii_uppercase());
            assert!(h.contains(&id), "{id}");
        }
        assert!(SOURCE.contains(MARKER));
        let m = mkc_ir::embedded::resolve_model("tiny").unwrap();
        assert!(with_header("no marker", &m).is_err());
        // Pages per task are build constants from the work geometry (the tiny model's file
        // says 2 for its matvecs, 8 for its LM head).
        let mh = model_header(&m);
        for kind in mkc_ir::work::MATVECS {
            let w = mkc_ir::work::matvec(&m, kind).unwrap();
            let name = kind.name().to_ascii_uppercase();
            let line = format!("#define TASK_PAGES_{name} {}", w.task_pages);
            assert!(mh.contains(&line), "{line}");
            // The one page loop each body compiles: its K chunk's columns.
            let line = format!("#define K_COLS_{name} {}", k_cols(w.k));
            assert!(mh.contains(&line), "{line}");
        }
    }

    /// A K chunk the kernels stream is its own page loop (its 256-column groups, the last
    /// partial where it is no multiple of 256); any other (a model the kernels refuse before
    /// launch) gets the placeholder loop, never a row the page loop cannot take.
    #[test]
    fn k_cols_are_the_page_loops_the_kernels_have() {
        for (k, groups) in [(512, 2), (576, 3), (960, 4), (1024, 4), (2048, 8)] {
            assert_eq!((k_cols(k), k_groups(k)), (k, groups), "{k}");
        }
        // Longer chunks are staged and taken in blocks of 8 groups and a last block.
        for (k, groups) in [(3072, 12), (3200, 13), (4096, 16), (8192, 32)] {
            assert_eq!((k_cols(k), k_groups(k)), (k, groups), "{k}");
        }
        for k in [0, 4, 2100 + 2] {
            assert_eq!((k_cols(k), k_groups(k)), (K_COLS_UNRUN, 8), "{k}");
        }
        // Every embedded model the catalogue lets the kernels run streams K chunks the page
        // loop takes, so its generated loop is its own.
        for (name, text) in mkc_ir::embedded::MODELS {
            let m = mkc_ir::Model::parse(name, text).unwrap();
            if mkc_catalogue::check_model(&m).is_err() {
                continue;
            }
            for kind in mkc_ir::work::MATVECS {
                let w = mkc_ir::work::matvec(&m, kind).unwrap();
                assert_eq!(k_cols(w.k), w.k, "{name} {kind:?}");
            }
        }
    }

    proptest::proptest! {
        /// Over random geometries, page sizes and MLP shard counts: the header names, for
        /// every matvec, the page loop of its K chunk from the work geometry, and wherever
        /// the catalogue lets the kernels run the model that loop covers the chunk exactly.
        #[test]
        fn the_generated_page_loops_are_the_work_geometrys(
            hidden in proptest::sample::select(vec![512u32, 576, 960, 1024, 2048, 3072, 3200, 4096]),
            inter_mult in 1u32..=4,
            shards in proptest::sample::select(vec![1u32, 2, 4, 8]),
            page_kib in proptest::sample::select(vec![4u32, 8, 16, 32]),
        ) {
            let mut m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
            m.geometry.hidden = hidden;
            m.geometry.intermediate = hidden * inter_mult;
            m.geometry.heads = hidden / m.geometry.head_dim;
            m.lowering.vtp_shards.up_gate_down = shards;
            m.lowering.page_bytes = page_kib * 1024;
            proptest::prop_assume!(m.validate("random").is_ok());
            let header = model_header(&m);
            let runs = mkc_catalogue::check_model(&m).is_ok();
            for kind in mkc_ir::work::MATVECS {
                let w = mkc_ir::work::matvec(&m, kind).unwrap();
                let name = kind.name().to_ascii_uppercase();
                let line = format!("#define K_COLS_{name} {}\n", k_cols(w.k));
                proptest::prop_assert!(header.contains(&line), "{}", line);
                if runs {
                    proptest::prop_assert_eq!(k_cols(w.k), w.k);
                    // A chunk longer than the registers hold reads a staged input that holds
                    // every chunk at its own offset; the bodies that may read global memory
                    // (the O-projection, down) are told so.
                    let staged = mkc_catalogue::staged_input(&m, kind, &w);
                    let line = format!("#define X_LEN_{name} {staged}\n");
                    proptest::prop_assert!(header.contains(&line), "{}", line);
                    if mkc_catalogue::blocked_k(w.k) {
                        proptest::prop_assert!(staged >= w.k * w.splits);
                    }
                    if matches!(kind, mkc_ir::OpKind::OProj | mkc_ir::OpKind::Down) {
                        proptest::prop_assert_eq!(staged > 0, mkc_catalogue::blocked_k(w.k));
                    }
                }
            }
        }
    }

    /// NVRTC checks the shared-memory layout and the work rules: a catalogue whose ring offset,
    /// KV chunk, CTA task run, residual share, ring slot or warming depth disagrees with the
    /// kernels' rule fails to compile, naming the rule and the operator.
    #[test]
    fn nvrtc_refuses_a_shared_memory_layout_that_disagrees_with_rust() {
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        let checks = model_checks(&m);
        assert!(checks.matches("static_assert(").count() > 2 * 5 + 1);
        let source = |checks: &str| {
            SOURCE
                .replacen(MARKER, &model_header(&m), 1)
                .replacen(CHECKS_MARKER, checks, 1)
        };
        let compile =
            |text: &str| compile_text(text, c"mkc.cu", "sm_90a", Vec::new(), &Tuning::default());
        match compile(&source(&checks)) {
            Err(crate::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found (the layout check needs it)");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => {
                let off = mkc_catalogue::stream(&m, mkc_ir::OpKind::OProj)
                    .unwrap()
                    .ring_offset();
                for (from, to, why) in [
                    (
                        format!("== {off},"),
                        format!("== {},", off + 128),
                        "ring offset of o_proj",
                    ),
                    (
                        format!(
                            "== {}, \"Rust and CUDA disagree on attention",
                            mkc_catalogue::attention_chunk(&m)
                        ),
                        "== 1, \"Rust and CUDA disagree on attention".to_string(),
                        "attention's KV chunk",
                    ),
                    (
                        "== 0, \"Rust and CUDA disagree on the task run".to_string(),
                        "== 1, \"Rust and CUDA disagree on the task run".to_string(),
                        "task run of CTA 0 of 1 of qkv_rope",
                    ),
                    (
                        "== 0, \"Rust and CUDA disagree on the residual share".to_string(),
                        "== 4, \"Rust and CUDA disagree on the residual share".to_string(),
                        "residual share of task 0 of qkv_rope",
                    ),
                    (
                        "== 0, \"Rust and CUDA disagree on the ring slot".to_string(),
                        "== 1, \"Rust and CUDA disagree on the ring slot".to_string(),
                        "ring slot of page 0 of qkv_rope",
                    ),
                    (
                        "== 2, \"Rust and CUDA disagree on the warming depth".to_string(),
                        "== 3, \"Rust and CUDA disagree on the warming depth".to_string(),
                        "warming depth",
                    ),
                ] {
                    let bad = checks.replacen(&from, &to, 1);
                    assert_ne!(bad, checks, "{from}");
                    let err = compile(&source(&bad))
                        .err()
                        .expect("a wrong layout compiles")
                        .to_string();
                    assert!(err.contains(why), "{err}");
                }
            }
        }
    }

    /// NVRTC checks the generated layout: a C struct that disagrees with the Rust one (here a
    /// field the Rust side lacks) fails to compile, naming the first field out of place.
    #[test]
    fn nvrtc_refuses_a_layout_that_disagrees_with_rust() {
        let m = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        let good = with_header(SOURCE, &m).unwrap();
        let bad = with_header(SOURCE, &m).unwrap().replacen(
            "const bf16* w_o;",
            "const bf16* w_o;\n    int extra;",
            1,
        );
        let compile =
            |text: &str| compile_text(text, c"mkc.cu", "sm_90a", Vec::new(), &Tuning::default());
        match compile(&good) {
            Err(crate::BackendError::NoNvrtc) => {
                eprintln!("SKIPPED: no NVRTC library found (the layout check needs it)");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => {
                let err = compile(&bad)
                    .err()
                    .expect("a mismatched layout compiles")
                    .to_string();
                assert!(
                    err.contains("Layer.w_gate_up differs between Rust and CUDA"),
                    "{err}"
                );
            }
        }
    }
}
