//! Validation of a parsed [`Model`]: every constraint the lowering relies on, each failure
//! reported with the field and the fix.

use crate::error::InputError;
use crate::input::FileKind;
use crate::model::Model;

/// Largest value accepted for a dimension; keeps every product within `u64` and task counts sane.
pub const MAX_DIM: u32 = 1 << 20;
/// Largest task count a lowering may produce: it bounds compile time and memory (1 M tasks
/// compile and verify in ~2 GB) and guards against accidental 1-row tiles on huge models.
pub const MAX_TASKS: u64 = 1_000_000;
/// Most rows a tensor may have (a split-K operator's partial blocks: K chunks x hidden); what a
/// schedule file's tensors are checked against when it is read back.
pub const MAX_TENSOR_ROWS: u64 = 1 << 24;
/// Range of `geometry.rope_theta`: kept well inside f32, which the kernels compute in.
pub const ROPE_THETA_RANGE: (f64, f64) = (1.0, 1e12);
/// Range of `geometry.norm_eps`: a normal f32 that leaves RMSNorm meaningful.
pub const NORM_EPS_RANGE: (f64, f64) = (1e-12, 1.0);

/// The accepted range of every bounded whole-number field of a model file: the one table that
/// validation and parse errors both read.
pub fn model_range(field: &str) -> Option<(u64, u64)> {
    let dim = (1, MAX_DIM as u64);
    Some(match field {
        "geometry.hidden"
        | "geometry.intermediate"
        | "geometry.checkpoint_intermediate"
        | "geometry.checkpoint_head_dim"
        | "geometry.heads"
        | "geometry.kv_heads"
        | "geometry.head_dim"
        | "geometry.vocab" => dim,
        "geometry.layers" => (1, 4096),
        "workload.prompt_len" | "workload.generate" | "workload.max_seq_len" => dim,
        "lowering.matvec_task_pages"
        | "lowering.lm_head_task_pages"
        | "lowering.attention_split"
        | "lowering.attention_kv_split"
        | "lowering.attention_in_o_proj" => dim,
        "lowering.page_bytes" => (256, 1 << 20),
        f if f.starts_with("lowering.vtp_shards.") => dim,
        "lowering.kernel.threads" => (32, 1024),
        "lowering.kernel.registers" => (1, 255),
        "lowering.kernel.dynamic_smem_bytes" => (0, u32::MAX as u64),
        "tuning.consumer_warps" | "tuning.persistent_warps" => (1, 8),
        "tuning.persistent_slots" => (1, 16),
        "tuning.persistent_boundary_inflight" => (0, 16),
        "tuning.persistent_stream_inflight" => (1, 16),
        "tuning.persistent_warm_pages" => (0, 32),
        "tuning.stream_smem" => (1, 232_448),
        "tuning.att_threads" => (128, 1024),
        "tuning.att_chunk" => (1, MAX_DIM as u64),
        "tuning.o_ctas" | "tuning.qkv_ctas" => (1, 4096),
        "tuning.warm_depth" | "tuning.warm_qkv" => (0, 16),
        "tuning.warm_skip" | "tuning.warm_qkv_skip" => (0, MAX_DIM as u64),
        "tuning.warm_o" => (0, 1),
        _ => return None,
    })
}

/// What a field of a file of `kind` takes, in words, for parse errors.
pub fn expects(kind: FileKind, field: &str) -> Option<String> {
    let float = |(lo, hi): (f64, f64)| format!("a number from {lo:e} to {hi:e}");
    match kind {
        FileKind::Model => match field {
            "geometry.rope_theta" => Some(float(ROPE_THETA_RANGE)),
            "geometry.norm_eps" => Some(float(NORM_EPS_RANGE)),
            "geometry.tied_embeddings" => Some("true or false".into()),
            "geometry.dtype" => Some("Bf16".into()),
            "name" => Some("a string in double quotes".into()),
            f => model_range(f).map(|(lo, hi)| format!("a whole number from {lo} to {hi}")),
        },
        FileKind::Tuning => model_range(&format!("tuning.{field}"))
            .map(|(lo, hi)| format!("a whole number from {lo} to {hi}")),
        FileKind::Device | FileKind::Sweep => crate::device::expects(field),
        FileKind::Schedule | FileKind::CheckpointConfig | FileKind::Measured => None,
    }
}

/// Checks `model`; `file` names it in the error.
pub fn validate(model: &Model, file: &str) -> Result<(), InputError> {
    check_geometry(model, file)?;
    check_workload(model, file)?;
    check_lowering(model, file)?;
    check_shards(model, file)?;
    check_kernel(model, file)?;
    check_tuning(&model.tuning, file)
}

/// Checks every tuning knob that is set against its range in [`model_range`] (named
/// `tuning.<knob>`, in a model file's section and a `--tune` file alike).
pub fn check_tuning(t: &crate::model::Tuning, file: &str) -> Result<(), InputError> {
    for (name, value) in t.knobs() {
        if let Some(v) = value {
            let field = format!("tuning.{name}");
            let (lo, hi) = model_range(&field).expect("every knob has a range");
            if (v as u64) < lo || v as u64 > hi {
                return Err(InputError::invalid(
                    file,
                    field,
                    format!("{v} is out of range"),
                    format!("use a value between {lo} and {hi}, or leave it out for the default"),
                ));
            }
        }
    }
    if let Some(a) = t.att_threads {
        if !a.is_multiple_of(128) {
            return Err(InputError::invalid(
                file,
                "tuning.att_threads",
                format!("{a} is not a multiple of 128"),
                "use 128, 256, 384, ... 1024",
            ));
        }
    }
    Ok(())
}

/// Checks `value` against the field's range in [`model_range`].
fn positive(file: &str, field: &str, value: u32) -> Result<(), InputError> {
    let (lo, hi) = model_range(field).unwrap_or((1, MAX_DIM as u64));
    if (value as u64) < lo || value as u64 > hi {
        return Err(InputError::invalid(
            file,
            field,
            format!("{value} is out of range"),
            format!("use a value between {lo} and {hi}"),
        ));
    }
    Ok(())
}

/// Checks a float field against its range.
fn within(
    file: &str,
    field: &str,
    value: f64,
    (lo, hi): (f64, f64),
    hint: &str,
) -> Result<(), InputError> {
    if !(value.is_finite() && value >= lo && value <= hi) {
        return Err(InputError::invalid(
            file,
            field,
            format!("{value} is outside {lo:e} to {hi:e} (the kernels compute in f32)"),
            hint,
        ));
    }
    Ok(())
}

fn divides(
    file: &str,
    field: &str,
    divisor: u32,
    divisor_name: &str,
    dividend: u32,
    dividend_name: &str,
) -> Result<(), InputError> {
    if !dividend.is_multiple_of(divisor) {
        return Err(InputError::invalid(
            file,
            field,
            format!("{divisor_name} = {divisor} does not divide {dividend_name} = {dividend}"),
            format!(
                "choose {divisor_name} among the divisors of {dividend} (e.g. {})",
                divisors_hint(dividend)
            ),
        ));
    }
    Ok(())
}

/// A few small divisors of `n`, for error messages.
fn divisors_hint(n: u32) -> String {
    let list: Vec<String> = (1..=n.min(4096))
        .filter(|d| n.is_multiple_of(*d))
        .rev()
        .take(6)
        .map(|d| d.to_string())
        .collect();
    list.join(", ")
}

/// Checks `m`'s geometry's sizes: each positive and within its range (`model_range`), what no
/// lowering or padding can change (`Model::validate_geometry_sizes`).
pub(crate) fn check_geometry_sizes(m: &Model, file: &str) -> Result<(), InputError> {
    let g = &m.geometry;
    for (field, value) in [
        ("geometry.hidden", g.hidden),
        ("geometry.intermediate", g.intermediate),
        ("geometry.heads", g.heads),
        ("geometry.kv_heads", g.kv_heads),
        ("geometry.head_dim", g.head_dim),
        ("geometry.vocab", g.vocab),
    ] {
        positive(file, field, value)?;
    }
    positive(file, "geometry.layers", g.layers)
}

fn check_geometry(m: &Model, file: &str) -> Result<(), InputError> {
    let g = &m.geometry;
    check_geometry_sizes(m, file)?;
    if let Some(stored) = g.checkpoint_intermediate {
        if stored == 0 || stored > g.intermediate {
            return Err(InputError::invalid(
                file,
                "geometry.checkpoint_intermediate",
                format!(
                    "{stored} is not a width from 1 to intermediate ({}): the checkpoint's MLP \
                     is zero-padded to intermediate, never cut",
                    g.intermediate
                ),
                "give the checkpoint's intermediate_size, at most geometry.intermediate, or \
                 remove the field",
            ));
        }
    }
    if let Some(stored) = g.checkpoint_head_dim {
        if stored == 0 || stored >= g.head_dim || !stored.is_multiple_of(2) {
            return Err(InputError::invalid(
                file,
                "geometry.checkpoint_head_dim",
                format!(
                    "{stored} is not an even width from 2 to below head_dim ({}): the \
                     checkpoint's heads are zero-padded to head_dim, never cut, and RoPE \
                     rotates pairs",
                    g.head_dim
                ),
                "give the checkpoint's head width (even, below geometry.head_dim), or remove \
                 the field",
            ));
        }
    }
    divides(file, "geometry.heads", g.heads, "heads", g.hidden, "hidden")?;
    divides(
        file,
        "geometry.kv_heads",
        g.kv_heads,
        "kv_heads",
        g.heads,
        "heads",
    )?;
    for (field, value, fix) in [
        (
            "geometry.hidden",
            g.hidden,
            "use a residual width that is a multiple of 8 (mkc cannot pad the residual stream)"
                .to_string(),
        ),
        (
            "geometry.intermediate",
            g.intermediate,
            format!(
                "set intermediate to {} and checkpoint_intermediate: Some({}) (the checkpoint's \
                 MLP is then zero-padded; `mkc model` does this)",
                g.intermediate.next_multiple_of(8),
                g.intermediate
            ),
        ),
        (
            "geometry.head_dim",
            g.head_dim,
            g.padded_head_dim().map_or_else(
                || {
                    "mkc cannot pad an odd head width: RoPE rotates pairs of a head's \
                     dimensions, so a head width must be even"
                        .to_string()
                },
                |padded| {
                    format!(
                        "set head_dim to {padded} and checkpoint_head_dim: Some({}) (the \
                         checkpoint's heads are then zero-padded; `mkc model` does this)",
                        g.head_dim
                    )
                },
            ),
        ),
    ] {
        if !value.is_multiple_of(8) {
            return Err(InputError::invalid(
                file,
                field,
                format!(
                    "{value} is not a multiple of 8, so rows cannot be read with 16-byte loads"
                ),
                &fix,
            ));
        }
    }
    within(
        file,
        "geometry.rope_theta",
        g.rope_theta,
        ROPE_THETA_RANGE,
        "use the checkpoint's rope_theta, e.g. 500000.0",
    )?;
    if let Some(s) = &g.rope_scaling {
        let bad = |field: &str, problem: String| {
            Err(InputError::invalid(
                file,
                format!("geometry.rope_scaling.{field}"),
                problem,
                "use the checkpoint's rope_scaling (Llama 3.2: factor 32.0, low_freq_factor 1.0, \
                 high_freq_factor 4.0, original_max_position_embeddings 8192)",
            ))
        };
        if !(s.factor.is_finite() && (1.0..=1e6).contains(&s.factor)) {
            return bad(
                "factor",
                format!("{} is not a factor from 1 to 1e6", s.factor),
            );
        }
        // Each kind's fields only: another kind's would be ignored, which a file must not rely
        // on.
        use crate::model::RopeType;
        let set = [
            ("low_freq_factor", s.low_freq_factor != 0.0),
            ("high_freq_factor", s.high_freq_factor != 0.0),
            (
                "original_max_position_embeddings",
                s.original_max_position_embeddings != 0,
            ),
            ("beta_fast", s.beta_fast.is_some()),
            ("beta_slow", s.beta_slow.is_some()),
            ("attention_factor", s.attention_factor.is_some()),
            ("truncate", s.truncate.is_some()),
        ];
        let own = s.fields();
        if let Some((field, _)) = set
            .iter()
            .find(|(f, on)| *on && !own.iter().any(|(o, _)| o == f))
        {
            return Err(InputError::invalid(
                file,
                format!("geometry.rope_scaling.{field}"),
                format!(
                    "is not a field of {} scaling (rope_type: {:?})",
                    s.rope_type.config_name(),
                    s.rope_type
                ),
                format!("remove {field}, or give the rope_type whose field it is"),
            ));
        }
        match s.rope_type {
            RopeType::Linear => {}
            RopeType::Llama3 => check_llama3_scaling(s, bad)?,
            RopeType::Yarn => check_yarn_scaling(s, bad)?,
        }
    }
    within(
        file,
        "geometry.norm_eps",
        g.norm_eps,
        NORM_EPS_RANGE,
        "use the checkpoint's rms_norm_eps, e.g. 1e-5",
    )?;
    check_derived(m, file)
}

/// Sizes derived from several fields, computed in u64 so that nothing wraps, and bounded so
/// that every later u32 row count and u64 byte total stays in range.
fn check_derived(m: &Model, file: &str) -> Result<(), InputError> {
    let g = &m.geometry;
    let q_dim = g.heads as u64 * g.head_dim as u64;
    if q_dim > MAX_DIM as u64 {
        return Err(InputError::invalid(
            file,
            "geometry.head_dim",
            format!(
                "heads x head_dim = {} x {} = {q_dim} exceeds the supported query width {MAX_DIM}",
                g.heads, g.head_dim
            ),
            "use the checkpoint's head_dim (usually hidden / heads)",
        ));
    }
    Ok(())
}

fn check_workload(m: &Model, file: &str) -> Result<(), InputError> {
    let w = &m.workload;
    positive(file, "workload.prompt_len", w.prompt_len)?;
    positive(file, "workload.generate", w.generate)?;
    positive(file, "workload.max_seq_len", w.max_seq_len)?;
    if w.prompt_len as u64 + w.generate as u64 > w.max_seq_len as u64 {
        return Err(InputError::invalid(
            file,
            "workload.max_seq_len",
            format!(
                "prompt_len + generate = {} exceeds max_seq_len = {}",
                w.prompt_len as u64 + w.generate as u64,
                w.max_seq_len
            ),
            "raise max_seq_len or shorten the workload",
        ));
    }
    Ok(())
}

fn check_lowering(m: &Model, file: &str) -> Result<(), InputError> {
    let (g, l) = (&m.geometry, &m.lowering);
    positive(file, "lowering.page_bytes", l.page_bytes)?;
    positive(file, "lowering.matvec_task_pages", l.matvec_task_pages)?;
    positive(file, "lowering.lm_head_task_pages", l.lm_head_task_pages)?;
    positive(file, "lowering.attention_split", l.attention_split)?;
    divides(
        file,
        "lowering.attention_split",
        l.attention_split,
        "attention_split",
        g.heads / g.kv_heads,
        "heads / kv_heads",
    )?;
    let kv_parts = l.kv_parts();
    positive(file, "lowering.attention_kv_split", kv_parts)?;
    if kv_parts > m.workload.max_seq_len {
        return Err(InputError::invalid(
            file,
            "lowering.attention_kv_split",
            format!(
                "{} parts of a history of at most {} positions (workload.max_seq_len) leave \
                 parts that never hold a position",
                kv_parts, m.workload.max_seq_len
            ),
            "use at most max_seq_len parts (a part per 64 or more positions is typical)",
        ));
    }
    if m.attention_out_rows() > MAX_TENSOR_ROWS {
        return Err(InputError::invalid(
            file,
            "lowering.attention_kv_split",
            format!(
                "{} partial records per head make attention's output {} rows, more than the \
                 {MAX_TENSOR_ROWS} rows a tensor may have",
                kv_parts,
                m.attention_out_rows()
            ),
            "use fewer parts",
        ));
    }
    if let Some(tasks) = l.attention_in_o_proj {
        check_attention_in_o_proj(m, file, tasks)?;
    }
    // The split-K factors first: the O-projection's and down's K chunks depend on them.
    for edge in crate::lower::shard_edges(m) {
        let field = format!("lowering.vtp_shards.{}", edge.field);
        positive(file, &field, edge.shards)?;
    }
    let s = &l.vtp_shards;
    for (field, shards, rows, name) in [
        (
            "attention_o_proj",
            s.attention_o_proj,
            m.q_dim(),
            "heads x head_dim",
        ),
        (
            "up_gate_down",
            s.up_gate_down,
            g.intermediate,
            "intermediate",
        ),
    ] {
        let field = format!("lowering.vtp_shards.{field}");
        divides(file, &field, shards, "the shard count", rows, name)?;
        if shards as u64 * g.hidden as u64 > MAX_TENSOR_ROWS {
            return Err(InputError::invalid(
                file,
                &field,
                format!(
                    "{shards} partial blocks of {} rows exceed the {MAX_TENSOR_ROWS} rows a tensor \
                     may have",
                    g.hidden
                ),
                "use fewer shards",
            ));
        }
    }
    for kind in crate::work::MATVECS {
        check_pages(m, file, kind)?;
    }
    let tasks = crate::lower::task_count(m);
    if tasks > MAX_TASKS {
        return Err(InputError::invalid(
            file,
            "lowering.matvec_task_pages",
            format!("the lowering yields {tasks} tasks, more than the supported {MAX_TASKS}"),
            "use more pages per task (or larger pages)",
        ));
    }
    Ok(())
}

/// Attention inside the O-projection: one KV part, the edges it removes left at one shard,
/// every O-projection task after all of QKV (which zeroes the vector it adds into), and its
/// `tasks` runs tiling a K chunk's pages.
fn check_attention_in_o_proj(m: &Model, file: &str, tasks: u32) -> Result<(), InputError> {
    let field = "lowering.attention_in_o_proj";
    positive(file, field, tasks)?;
    let l = &m.lowering;
    let refuse = |what: String, fix: &str| Err(InputError::invalid(file, field, what, fix));
    if l.kv_parts() > 1 {
        return refuse(
            format!(
                "attention inside the O-projection reads each head's whole history, but \
                 attention_kv_split is {}",
                l.kv_parts()
            ),
            "remove attention_kv_split (or set it to 1), or remove attention_in_o_proj",
        );
    }
    if l.vtp_shards.attention_o_proj != 1 {
        return refuse(
            format!(
                "vtp_shards.attention_o_proj is {}, but with attention inside the O-projection \
                 there is no attention edge to shard (its K chunks are the attention tasks')",
                l.vtp_shards.attention_o_proj
            ),
            "remove vtp_shards.attention_o_proj (or set it to 1)",
        );
    }
    if l.vtp_shards.qkv_attention != 1 {
        return refuse(
            format!(
                "vtp_shards.qkv_attention is {}, but every O-projection task must wait for all \
                 of QKV, whose tasks zero the vector it adds into",
                l.vtp_shards.qkv_attention
            ),
            "remove vtp_shards.qkv_attention (or set it to 1)",
        );
    }
    let Some(w) = crate::work::matvec(m, crate::graph::OpKind::OProj) else {
        return Ok(());
    };
    let probe = crate::work::MatvecWork { task_pages: 1, ..w };
    let pages = probe.chunk_pages();
    if !pages.is_multiple_of(tasks) || tasks > pages {
        return refuse(
            format!(
                "{tasks} tasks per attention task do not tile the {pages} pages of one of the \
                 O-projection's K chunks"
            ),
            &format!(
                "choose a divisor of {pages} (e.g. {})",
                divisors_hint(pages)
            ),
        );
    }
    Ok(())
}

/// Llama 3 scaling's own fields: positive frequency factors, the high above the low, and an
/// original context in range; `bad(field, problem)` words the refusal.
fn check_llama3_scaling(
    s: &crate::model::RopeScaling,
    bad: impl Fn(&str, String) -> Result<(), InputError>,
) -> Result<(), InputError> {
    if !(s.low_freq_factor.is_finite() && s.low_freq_factor > 0.0 && s.low_freq_factor < 1e6) {
        return bad(
            "low_freq_factor",
            format!("{} is not a positive number", s.low_freq_factor),
        );
    }
    if !(s.high_freq_factor.is_finite()
        && s.high_freq_factor > s.low_freq_factor
        && s.high_freq_factor < 1e6)
    {
        return bad(
            "high_freq_factor",
            format!("{} is not above low_freq_factor", s.high_freq_factor),
        );
    }
    check_original_context(s, &bad)
}

/// YaRN's own fields: an original context in range, the fast rotations above the slow (both
/// positive) and a positive attention factor; `bad(field, problem)` words the refusal.
fn check_yarn_scaling(
    s: &crate::model::RopeScaling,
    bad: impl Fn(&str, String) -> Result<(), InputError>,
) -> Result<(), InputError> {
    check_original_context(s, &bad)?;
    let y = s.yarn().expect("a YaRN scaling");
    if !(y.beta_slow.is_finite() && y.beta_slow > 0.0 && y.beta_slow < 1e6) {
        return bad(
            "beta_slow",
            format!("{} is not a positive number", y.beta_slow),
        );
    }
    if !(y.beta_fast.is_finite() && y.beta_fast > y.beta_slow && y.beta_fast < 1e6) {
        return bad(
            "beta_fast",
            format!("{} is not above beta_slow ({})", y.beta_fast, y.beta_slow),
        );
    }
    if !(y.attention_factor.is_finite() && (0.01..=100.0).contains(&y.attention_factor)) {
        return bad(
            "attention_factor",
            format!("{} is not a factor from 0.01 to 100", y.attention_factor),
        );
    }
    Ok(())
}

/// The pre-training context of Llama 3's and YaRN's scaling, in range.
fn check_original_context(
    s: &crate::model::RopeScaling,
    bad: &impl Fn(&str, String) -> Result<(), InputError>,
) -> Result<(), InputError> {
    if s.original_max_position_embeddings == 0 || s.original_max_position_embeddings > MAX_DIM * 16
    {
        return bad(
            "original_max_position_embeddings",
            format!("{} is out of range", s.original_max_position_embeddings),
        );
    }
    Ok(())
}

/// A matvec's pages hold whole rows (whole RoPE pairs for QKV), and its tasks tile its pages;
/// the rows a page holds divide the operator's by construction (`MatvecWork::page_rows`).
fn check_pages(m: &Model, file: &str, kind: crate::graph::OpKind) -> Result<(), InputError> {
    let Some(w) = crate::work::matvec(m, kind) else {
        return Ok(());
    };
    let row_bytes = w.elem_bytes as u64 * w.k as u64 * w.page_rows() as u64;
    if (w.page_bytes as u64) < row_bytes {
        let what = match (w.paired, w.row_multiple) {
            (true, _) => " (a gate row and an up row)",
            (false, 2) => " (a RoPE pair: two rows)",
            _ => "",
        };
        return Err(InputError::invalid(
            file,
            "lowering.page_bytes",
            format!(
                "a page of {} bytes holds less than one row of {} ({} columns){what}",
                w.page_bytes,
                kind.name(),
                w.k,
            ),
            format!(
                "use page_bytes of at least {row_bytes} (the kernels take a power of two: {})",
                row_bytes.next_power_of_two()
            ),
        ));
    }
    let field = if kind == crate::graph::OpKind::LmHead {
        "lowering.lm_head_task_pages"
    } else {
        "lowering.matvec_task_pages"
    };
    divides(
        file,
        field,
        w.task_pages,
        "pages per task",
        w.chunk_pages(),
        &format!("the pages of one {} K chunk", kind.name()),
    )
}

fn check_shards(m: &Model, file: &str) -> Result<(), InputError> {
    for edge in crate::lower::shard_edges(m) {
        let field = format!("lowering.vtp_shards.{}", edge.field);
        if !edge.rows.is_multiple_of(edge.shards as u64) {
            return Err(InputError::invalid(
                file,
                &field,
                format!(
                    "{} shards do not divide the {} rows of {}",
                    edge.shards, edge.rows, edge.tensor
                ),
                format!("choose a divisor of {}", edge.rows),
            ));
        }
        let shard_rows = edge.rows / edge.shards as u64;
        if !shard_rows.is_multiple_of(edge.producer_tile_rows as u64) {
            return Err(InputError::invalid(
                file,
                &field,
                format!(
                    "a shard of {shard_rows} rows does not hold whole producer tasks of {} rows, \
                     so one task would signal two shards",
                    edge.producer_tile_rows
                ),
                format!(
                    "choose a shard count that divides {}",
                    edge.rows / edge.producer_tile_rows as u64
                ),
            ));
        }
    }
    Ok(())
}

fn check_kernel(m: &Model, file: &str) -> Result<(), InputError> {
    let k = &m.lowering.kernel;
    positive(file, "lowering.kernel.threads", k.threads)?;
    if !k.threads.is_multiple_of(32) {
        return Err(InputError::invalid(
            file,
            "lowering.kernel.threads",
            format!("{} is not a whole number of warps", k.threads),
            "use a multiple of 32",
        ));
    }
    positive(file, "lowering.kernel.registers", k.registers)?;
    Ok(())
}
