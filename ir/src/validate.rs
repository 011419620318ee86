//! Validation of a parsed [`Model`]: every constraint the lowering relies on, each failure
//! reported with the field and the fix.

use crate::error::InputError;
use crate::model::Model;

/// Largest value accepted for a dimension; keeps every product within `u64` and task counts sane.
const MAX_DIM: u32 = 1 << 20;
/// Largest task count a lowering may produce (guards against accidental 1-row tiles on huge models).
const MAX_TASKS: u64 = 4_000_000;

/// Checks `model`; `file` names it in the error.
pub fn validate(model: &Model, file: &str) -> Result<(), InputError> {
    check_geometry(model, file)?;
    check_workload(model, file)?;
    check_lowering(model, file)?;
    check_shards(model, file)?;
    check_kernel(model, file)
}

fn positive(file: &str, field: &str, value: u32, max: u32) -> Result<(), InputError> {
    if value == 0 || value > max {
        return Err(InputError::invalid(
            file,
            field,
            format!("{value} is out of range"),
            format!("use a value between 1 and {max}"),
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

fn check_geometry(m: &Model, file: &str) -> Result<(), InputError> {
    let g = &m.geometry;
    for (field, value) in [
        ("geometry.hidden", g.hidden),
        ("geometry.intermediate", g.intermediate),
        ("geometry.heads", g.heads),
        ("geometry.kv_heads", g.kv_heads),
        ("geometry.head_dim", g.head_dim),
        ("geometry.vocab", g.vocab),
    ] {
        positive(file, field, value, MAX_DIM)?;
    }
    positive(file, "geometry.layers", g.layers, 4096)?;
    divides(file, "geometry.heads", g.heads, "heads", g.hidden, "hidden")?;
    divides(
        file,
        "geometry.kv_heads",
        g.kv_heads,
        "kv_heads",
        g.heads,
        "heads",
    )?;
    for (field, value) in [
        ("geometry.hidden", g.hidden),
        ("geometry.intermediate", g.intermediate),
        ("geometry.head_dim", g.head_dim),
    ] {
        if !value.is_multiple_of(8) {
            return Err(InputError::invalid(
                file,
                field,
                format!(
                    "{value} is not a multiple of 8, so rows cannot be read with 16-byte loads"
                ),
                "round the dimension to a multiple of 8",
            ));
        }
    }
    if !(g.rope_theta.is_finite() && g.rope_theta > 0.0) {
        return Err(InputError::invalid(
            file,
            "geometry.rope_theta",
            format!("{} is not a positive number", g.rope_theta),
            "use the checkpoint's rope_theta, e.g. 500000.0",
        ));
    }
    if !(g.norm_eps.is_finite() && g.norm_eps > 0.0) {
        return Err(InputError::invalid(
            file,
            "geometry.norm_eps",
            format!("{} is not a positive number", g.norm_eps),
            "use the checkpoint's rms_norm_eps, e.g. 1e-5",
        ));
    }
    Ok(())
}

fn check_workload(m: &Model, file: &str) -> Result<(), InputError> {
    let w = &m.workload;
    positive(file, "workload.prompt_len", w.prompt_len, MAX_DIM)?;
    positive(file, "workload.generate", w.generate, MAX_DIM)?;
    positive(file, "workload.max_seq_len", w.max_seq_len, MAX_DIM)?;
    if w.prompt_len as u64 + w.generate as u64 > w.max_seq_len as u64 {
        return Err(InputError::invalid(
            file,
            "workload.max_seq_len",
            format!(
                "prompt_len + generate = {} exceeds max_seq_len = {}",
                w.prompt_len + w.generate,
                w.max_seq_len
            ),
            "raise max_seq_len or shorten the workload",
        ));
    }
    Ok(())
}

fn check_lowering(m: &Model, file: &str) -> Result<(), InputError> {
    let (g, l) = (&m.geometry, &m.lowering);
    positive(
        file,
        "lowering.matvec_tile_rows",
        l.matvec_tile_rows,
        MAX_DIM,
    )?;
    positive(
        file,
        "lowering.lm_head_tile_rows",
        l.lm_head_tile_rows,
        MAX_DIM,
    )?;
    positive(file, "lowering.attention_split", l.attention_split, MAX_DIM)?;
    let t = l.matvec_tile_rows;
    let field = "lowering.matvec_tile_rows";
    divides(file, field, t, "matvec_tile_rows", g.head_dim, "head_dim")?;
    divides(file, field, t, "matvec_tile_rows", g.hidden, "hidden")?;
    divides(
        file,
        field,
        t,
        "matvec_tile_rows",
        g.intermediate,
        "intermediate",
    )?;
    divides(
        file,
        "lowering.lm_head_tile_rows",
        l.lm_head_tile_rows,
        "lm_head_tile_rows",
        g.vocab,
        "vocab",
    )?;
    divides(
        file,
        "lowering.attention_split",
        l.attention_split,
        "attention_split",
        g.heads / g.kv_heads,
        "heads / kv_heads",
    )?;
    let tasks = crate::lower::task_count(m);
    if tasks > MAX_TASKS {
        return Err(InputError::invalid(
            file,
            "lowering.matvec_tile_rows",
            format!("the tiling yields {tasks} tasks, more than the supported {MAX_TASKS}"),
            "use larger tiles",
        ));
    }
    Ok(())
}

fn check_shards(m: &Model, file: &str) -> Result<(), InputError> {
    for edge in crate::lower::shard_edges(m) {
        let field = format!("lowering.vtp_shards.{}", edge.field);
        positive(file, &field, edge.shards, MAX_DIM)?;
        divides(
            file,
            &field,
            edge.shards,
            "the shard count",
            edge.rows,
            &format!("the rows of {}", edge.tensor),
        )?;
        let shard_rows = edge.rows / edge.shards;
        if !shard_rows.is_multiple_of(edge.producer_tile_rows) {
            return Err(InputError::invalid(
                file,
                &field,
                format!(
                    "a shard of {shard_rows} rows does not hold whole producer tiles of {} rows, \
                     so one tile would signal two shards",
                    edge.producer_tile_rows
                ),
                format!(
                    "choose a shard count that divides {}",
                    edge.rows / edge.producer_tile_rows
                ),
            ));
        }
    }
    Ok(())
}

fn check_kernel(m: &Model, file: &str) -> Result<(), InputError> {
    let k = &m.lowering.kernel;
    positive(file, "lowering.kernel.threads", k.threads, 1024)?;
    if !k.threads.is_multiple_of(32) {
        return Err(InputError::invalid(
            file,
            "lowering.kernel.threads",
            format!("{} is not a whole number of warps", k.threads),
            "use a multiple of 32",
        ));
    }
    positive(file, "lowering.kernel.registers", k.registers, 255)?;
    Ok(())
}
