//! `mkc probe`: hardware facts the simulator assumes, measured on the GPU: which pairs of kernels
//! share an SM (against the simulator's co-residency rule), L2 latency under load, L2 as a weight
//! source, and two matvec engines alone.

use mkc_backend::abi::PageInput;
use mkc_backend::gpu::{
    probe_attention, probe_coresidency, probe_l2, probe_latency, probe_matvec, probe_page_math,
    probe_partition, probe_sm_speeds, Deal, Gpu, OccupancyQuery, PairProbe, ATTENTION_REPEATS,
    L2_MIXED_MIB, L2_REPEATS, L2_WARMERS, MATVEC_REPEATS, PAGE_MATH_REPEATS, PARTITION_REPEATS,
    PROBE_REGISTERS, RESIDENT_SMEM, SM_SPEED_REPEATS, SM_SPEED_SLOTS,
};
use mkc_backend::kernels;
use mkc_ir::device::Arch;
use mkc_simulator::occupancy::{co_resident, occupancy, ArchRules, CtaResources};

use super::CommandError;
use crate::cli::{ProbeArgs, ProbeWhat};

/// Thread counts probed: a resident CTA of 8 or 9 warps (mkc's streaming kernels run 9),
/// a visitor of 8, 9 or 16.
const RESIDENT_THREADS: [u32; 2] = [256, 288];
const VISITOR_THREADS: [u32; 3] = [256, 288, 512];

/// Runs `mkc probe`.
pub fn run(args: ProbeArgs) -> Result<(), CommandError> {
    // The model `pages` builds is read, and refused if the kernels cannot run it, before the
    // GPU is opened: bad input is answered on any machine.
    let model = match args.what {
        ProbeWhat::Pages | ProbeWhat::Attention => {
            let (model, _) = super::resolve_model(&args.model)?;
            kernels::check_model(&model)?;
            if args.what == ProbeWhat::Attention {
                kernels::check_persistent(&model)?;
            }
            Some(model)
        }
        _ => None,
    };
    let gpu = Gpu::open()?;
    if gpu.cc != (9, 0) {
        return Err(CommandError::Input(format!(
            "mkc probe measures sm_90 (H100/H200); {} is sm_{}{}",
            gpu.name, gpu.cc.0, gpu.cc.1
        )));
    }
    // The probe kernels' own module, built only for the probes that run it.
    let probe_cubin = || kernels::compile_probe("sm_90a").map(|c| c.cubin);
    match args.what {
        ProbeWhat::Coresidency => coresidency(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::Latency => latency(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::L2 => l2(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::Matvec => matvec(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::Occupancy => occupancy_probe(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::Partition => partition(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::SmSpeeds => sm_speeds(&gpu, &probe_cubin()?, args.json),
        ProbeWhat::Pages | ProbeWhat::Attention => match (model, args.what) {
            (Some(model), ProbeWhat::Pages) => pages(&gpu, &model, args.json),
            (Some(model), _) => attention(&gpu, &model, args.json),
            (None, _) => Err(CommandError::Internal(
                "the probe's model was not read".into(),
            )),
        },
    }
}

/// Random configurations the occupancy probe queries.
const OCCUPANCY_QUERIES: usize = 12_000;

/// Compares the simulator's occupancy rule (with the GPU's profile's limits) with the driver's
/// answer on [`OCCUPANCY_QUERIES`] random configurations; prints the mismatches.
fn occupancy_probe(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let device = super::gpu_common::profile_for(&gpu.name)?;
    let rules = ArchRules::for_device(&device);
    let shapes = mkc_backend::gpu::occupancy_kernels(cubin)?;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut state = seed;
    let mut next = move |n: u64| {
        // xorshift64*: fresh, cheap, reproducible from the printed seed.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    };
    let mut queries: Vec<OccupancyQuery> = (0..OCCUPANCY_QUERIES)
        .map(|_| {
            let kernel = next(shapes.len() as u64) as usize;
            let room = 232_448 - shapes[kernel].static_smem as u64;
            OccupancyQuery {
                kernel,
                threads: 1 + next(1024) as u32,
                dynamic_smem: match next(4) {
                    0 => 0,
                    _ => next(room + 1) as u32,
                },
                carveout: match next(3) {
                    0 => None,
                    _ => Some(next(101) as u32),
                },
                driver: 0,
            }
        })
        .collect();
    mkc_backend::gpu::probe_occupancy(gpu, cubin, &mut queries)?;
    let rule = |q: &OccupancyQuery| {
        let k = &shapes[q.kernel];
        let cta = CtaResources {
            threads: q.threads,
            registers: k.registers,
            static_smem: k.static_smem,
            dynamic_smem: q.dynamic_smem,
        };
        occupancy(&rules, &cta, q.carveout).map_or(0, |o| o.blocks_per_sm)
    };
    let mismatches: Vec<&OccupancyQuery> = queries.iter().filter(|q| rule(q) != q.driver).collect();
    let describe = |q: &OccupancyQuery| {
        let k = &shapes[q.kernel];
        serde_json::json!({"kernel": k.name, "registers": k.registers, "static_smem": k.static_smem,
            "threads": q.threads, "dynamic_smem": q.dynamic_smem, "carveout": q.carveout,
            "driver": q.driver, "rule": rule(q)})
    };
    if json {
        let v = serde_json::json!({
            "schema": super::schema("probe.occupancy"), "gpu": gpu.name, "seed": seed,
            "queries": queries.len(), "mismatches": mismatches.iter().map(|q| describe(q)).collect::<Vec<_>>(),
        });
        outln!("{v}");
    } else {
        outln!(
            "occupancy rule against cuOccupancyMaxActiveBlocksPerMultiprocessor on {} (seed {seed}): \
             {} random configurations over {} kernels ({} register counts, static shared memory 0-40 KiB)",
            gpu.name,
            queries.len(),
            shapes.len(),
            {
                let mut r: Vec<u32> = shapes.iter().map(|s| s.registers).collect();
                r.sort_unstable();
                r.dedup();
                r.len()
            }
        );
        for q in mismatches.iter().take(20) {
            outln!("  mismatch: {}", describe(q));
        }
        let zero = queries.iter().filter(|q| q.driver == 0).count();
        outln!(
            "  {} mismatches; {} configurations cannot launch (0 CTAs), {} CTAs per SM at most",
            mismatches.len(),
            zero,
            queries.iter().map(|q| q.driver).max().unwrap_or(0)
        );
    }
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(CommandError::Internal(format!(
            "the occupancy rule disagrees with the driver on {} of {} configurations",
            mismatches.len(),
            queries.len()
        )))
    }
}

/// Prints both matvec engines' time alone per shape; a result off the CPU's fails the probe.
fn matvec(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let rows = probe_matvec(gpu, cubin)?;
    let bad = |e: f64| e.is_nan() || e >= 1e-3;
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| {
                serde_json::json!({"op": r.name, "rows": r.rows, "k": r.k,
                    "loads_us": r.loads_us, "loads_rel_l2": r.loads_err,
                    "bulk_us": r.bulk_us, "bulk_rel_l2": r.bulk_err})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.matvec"), "gpu": gpu.name, "shapes": v})
        );
    } else {
        outln!(
            "y = W x alone, one CTA per SM, cold L2, on {} (µs, median of {MATVEC_REPEATS}; GB/s):",
            gpu.name
        );
        outln!("  operator        rows x K        plain loads           bulk copies   rel L2 (loads, bulk)");
        for r in &rows {
            let mb = r.rows as f64 * r.k as f64 * 2.0 / 1000.0;
            outln!(
                "  {:<14} {:>6} x {:<5} {:>8.2} ({:>5.0})  {:>8.2} ({:>5.0})   {:.1e}, {:.1e}",
                r.name,
                r.rows,
                r.k,
                r.loads_us,
                mb / r.loads_us,
                r.bulk_us,
                mb / r.bulk_us,
                r.loads_err,
                r.bulk_err
            );
        }
    }
    if let Some(r) = rows.iter().find(|r| bad(r.loads_err) || bad(r.bulk_err)) {
        return Err(CommandError::Input(format!(
            "mkc probe matvec: {} gave a wrong y (relative L2 error {:.1e} loads, {:.1e} bulk; limit 1e-3)",
            r.name, r.loads_err, r.bulk_err
        )));
    }
    Ok(())
}

/// Prints how fast one CTA per SM streams pages from HBM, from L2 after a read, and from L2
/// after a prefetch.
fn l2(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let p = probe_l2(gpu, cubin)?;
    if json {
        let warmed: Vec<_> = p
            .warmed
            .iter()
            .map(|w| serde_json::json!({"how": L2_WARMERS[w.how], "mib": w.mib, "gbps": w.gbps}))
            .collect();
        let rows: Vec<_> = p
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"mib": r.mib, "slots": r.slots, "cold_gbps": r.cold_gbps,
                    "warm_gbps": r.warm_gbps, "warm_other_gbps": r.warm_other_gbps,
                    "prefetched_gbps": r.prefetched_gbps})
            })
            .collect();
        let mixed: Vec<_> = p
            .mixed
            .iter()
            .map(|m| {
                serde_json::json!({"mib": L2_MIXED_MIB, "slots": m.slots,
                    "warm_quarters": m.warm_quarters, "last": m.last, "stride": m.stride,
                    "gbps": m.gbps})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.l2"), "gpu": gpu.name, "rows": rows, "warmed": warmed, "mixed": mixed})
        );
        return Ok(());
    }
    outln!(
        "pages of 16 KiB streamed by one CTA per SM on {} (GB/s, median of {L2_REPEATS}):",
        gpu.name
    );
    outln!("  MiB  in flight  from HBM  L2 (same CTA read)  L2 (other CTA read)  L2 (prefetched)");
    for r in &p.rows {
        outln!(
            "  {:>3}  {:>9}  {:>8.0}  {:>18.0}  {:>19.0}  {:>15.0}",
            r.mib,
            r.slots,
            r.cold_gbps,
            r.warm_gbps,
            r.warm_other_gbps,
            r.prefetched_gbps
        );
    }
    outln!("the same read (4 in flight) after another grid warmed L2 (GB/s):");
    for w in &p.warmed {
        outln!(
            "  {:<45} {:>3} MiB  {:>6.0}",
            L2_WARMERS[w.how],
            w.mib,
            w.gbps
        );
    }
    outln!("{L2_MIXED_MIB} MiB read with part of every CTA's pages warmed by loads (GB/s):");
    for m in &p.mixed {
        let which = match (m.stride, m.last) {
            (0, false) => format!("first {}/4", m.warm_quarters),
            (0, true) => format!("last {}/4", m.warm_quarters),
            (s, _) => format!("every {s}th page"),
        };
        outln!(
            "  {} in flight, {which:<14} warmed  {:>6.0}",
            m.slots,
            m.gbps
        );
    }
    Ok(())
}

/// Prints how fast one CTA per SM streams an operator-sized buffer dealt in contiguous runs
/// against interleaved, and each read's per-CTA spread.
fn partition(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let p = probe_partition(gpu, cubin)?;
    let deal = |d: Deal| match d {
        Deal::Interleaved => "interleaved",
        Deal::Contiguous => "contiguous",
    };
    if json {
        let rows: Vec<_> = p
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"mib": r.mib, "slots": r.slots, "deal": deal(r.deal),
                    "offset_mib": r.offset_mib, "gbps": r.gbps, "cta_us": r.cta_us})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.partition"), "gpu": gpu.name, "rows": rows})
        );
        return Ok(());
    }
    outln!(
        "pages of 16 KiB read once by one CTA per SM on {} (medians of {PARTITION_REPEATS}):",
        gpu.name
    );
    outln!(
        "  MiB  in flight  offset MiB  deal         GB/s   per-CTA us: fastest  median  slowest"
    );
    for r in &p.rows {
        outln!(
            "  {:>3}  {:>9}  {:>10}  {:<11} {:>6.0}   {:>19.1} {:>7.1} {:>8.1}",
            r.mib,
            r.slots,
            r.offset_mib,
            deal(r.deal),
            r.gbps,
            r.cta_us[0],
            r.cta_us[1],
            r.cta_us[2]
        );
    }
    Ok(())
}

/// A probe's fresh, odd input seed (fresh weights and inputs each run), printed with its figures
/// so that a failure can be replayed.
fn fresh_seed() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.subsec_nanos())
        | 1
}

/// Largest relative L2 error of the page loop's row sums against the CPU that the probe accepts
/// (f32 sums of 2048 products in another order).
const PAGE_MATH_TOLERANCE: f64 = 1e-5;

/// The probe's name for where a case's loop takes its input: a blocked loop's registers are
/// its staged input's blocks.
fn page_input_label(input: PageInput, k_groups: u32) -> &'static str {
    match input {
        PageInput::Registers if k_groups > 8 => "staged",
        PageInput::Registers => "registers",
        PageInput::L2InSpan => "L2 in span",
        PageInput::TensorCores => "tensor cores",
    }
}

/// Prints how long the page loop of `model`'s operator kernels takes over landed pages, beside
/// the simulator's `page_compute_ns`; a row sum off the CPU's fails the probe.
fn pages(gpu: &Gpu, model: &mkc_ir::Model, json: bool) -> Result<(), CommandError> {
    let compiled = kernels::compile("sm_90a", model)?;
    let seed = fresh_seed();
    let p = probe_page_math(gpu, &compiled.cubin, model, seed)?;
    let profile = super::gpu_common::profile_for(&gpu.name)?;
    let modelled = profile.latencies.page_compute_ns;
    if json {
        let rows: Vec<_> = p
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"warps": r.warps, "pages": r.pages, "input": page_input_label(r.input, p.k_groups),
                    "beside_stream": r.beside_stream, "stream_gbps": r.stream_gbps,
                    "cta_ns": r.cta_ns, "cta_cycles": r.cta_cycles, "slowest_ns": r.slowest_ns,
                    "rel_l2": r.err})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.pages"), "gpu": gpu.name,
                "model": model.name, "k_groups": p.k_groups, "rows_per_page": p.rows_per_page,
                "page_bytes": p.page_bytes, "seed": p.seed, "modelled_page_ns": modelled,
                "modelled_mma_page_ns": profile.latencies.page_compute(true),
                "rows": rows})
        );
    } else {
        outln!(
            "page loop of {} ({} rows x {} columns per {} B page) over pages in shared memory, one CTA per SM on {} (medians of {PAGE_MATH_REPEATS} launches; seed {}):",
            model.name,
            p.rows_per_page,
            p.k,
            p.page_bytes,
            gpu.name,
            p.seed
        );
        outln!(
            "  warps  pages  input         CTA ns  cycles  slowest ns  ns per page per warp  rel L2   beside a stream"
        );
        for r in &p.rows {
            let rounds = r.pages.div_ceil(r.warps);
            outln!(
                "  {:>5}  {:>5}  {:<12} {:>7.0} {:>7.0} {:>11.0} {:>21.0}  {:.1e}  {}",
                r.warps,
                r.pages,
                page_input_label(r.input, p.k_groups),
                r.cta_ns,
                r.cta_cycles,
                r.slowest_ns,
                r.cta_ns / rounds as f64,
                r.err,
                if r.beside_stream {
                    format!("{:.1} GB/s per SM", r.stream_gbps)
                } else {
                    "-".to_string()
                }
            );
        }
        outln!(
            "  the simulator charges a consumer warp {modelled:.0} ns per page ({} latencies.page_compute_ns)",
            profile.name
        );
        if p.rows.iter().any(|r| r.input == PageInput::TensorCores) {
            outln!(
                "  and {:.0} ns per page on the tensor cores ({} latencies.page_compute_mma_ns, else page_compute_ns)",
                profile.latencies.page_compute(true),
                profile.name
            );
        }
    }
    matches_the_cpu(
        "pages",
        "the page loop's row sums are",
        p.rows.iter().map(|r| r.err),
        PAGE_MATH_TOLERANCE,
        p.seed,
    )
}

/// Fails probe `probe` (after it has printed) where a case's relative L2 error against the
/// CPU (`errors`) is over `limit`: `what` names the output, and the seed reproduces it.
fn matches_the_cpu(
    probe: &str,
    what: &str,
    errors: impl Iterator<Item = f64>,
    limit: f64,
    seed: u32,
) -> Result<(), CommandError> {
    let worst = errors.fold(0.0, f64::max);
    if worst > limit {
        return Err(CommandError::Internal(format!(
            "mkc probe {probe}: {what} off the CPU's (relative L2 error {worst:.1e}; limit {limit:.0e}, seed {seed})"
        )));
    }
    Ok(())
}

/// Largest relative L2 error of attention's output against the CPU that the probe accepts
/// (f32 softmax and sums in another order, `__expf` against `exp`).
const ATTENTION_TOLERANCE: f64 = 1e-4;

/// Prints how long attention's body takes alone in each build for 1, 2 and 4 query heads per
/// task, beside the simulator's attention terms; an output off the CPU's fails the probe.
fn attention(gpu: &Gpu, model: &mkc_ir::Model, json: bool) -> Result<(), CommandError> {
    // The probe times a task over its whole history: split-KV parts are that body on shorter
    // histories, so it runs the model unsplit.
    let mut whole = model.clone();
    whole.lowering.attention_kv_split = Some(1);
    let model = &whole;
    let chain = kernels::compile("sm_90a", model)?;
    let persistent = kernels::compile_persistent("sm_90a", model)?;
    let seed = fresh_seed();
    let p = probe_attention(gpu, &chain.cubin, &persistent.cubin, model, seed)?;
    let profile = super::gpu_common::profile_for(&gpu.name)?;
    let (task_ns, head_ns) = (
        profile.latencies.attention_task_ns,
        profile.latencies.attention_head_ns,
    );
    if json {
        let rows: Vec<_> = p
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({"build": r.build.name(), "heads": r.heads,
                    "positions": r.positions, "smem_bytes": r.smem_bytes, "tasks": r.tasks,
                    "cta_ns": r.cta_ns, "cta_cycles": r.cta_cycles, "slowest_ns": r.slowest_ns,
                    "rel_l2": r.err})
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.attention"), "gpu": gpu.name,
                "model": model.name, "head_dim": p.head_dim, "group": p.group, "seed": p.seed,
                "modelled_task_ns": task_ns, "modelled_head_ns": head_ns, "rows": rows,
                "skipped": p.skipped})
        );
    } else {
        outln!(
            "attention's body alone for {} (head_dim {}, {} query heads per KV head), one CTA per task of one layer on {} (medians of {ATTENTION_REPEATS} launches; seed {}); the span includes the KV history's load, which the persistent producer copies ahead:",
            model.name,
            p.head_dim,
            p.group,
            gpu.name,
            p.seed
        );
        outln!(
            "  build        heads  positions  tasks  smem B   CTA ns  cycles  slowest ns  rel L2"
        );
        for r in &p.rows {
            outln!(
                "  {:<11}  {:>5}  {:>9}  {:>5}  {:>6}  {:>7.0} {:>7.0} {:>11.0}  {:.1e}",
                r.build.name(),
                r.heads,
                r.positions,
                r.tasks,
                r.smem_bytes,
                r.cta_ns,
                r.cta_cycles,
                r.slowest_ns,
                r.err
            );
        }
        outln!(
            "  the simulator charges a task {task_ns:.0} ns plus {head_ns:.0} ns per query head ({} latencies.attention_task_ns, attention_head_ns)",
            profile.name
        );
        for why in &p.skipped {
            outln!("  skipped: {why}");
        }
    }
    matches_the_cpu(
        "attention",
        "the output is",
        p.rows.iter().map(|r| r.err),
        ATTENTION_TOLERANCE,
        p.seed,
    )
}

/// Prints the L2 latency of a dependent chain, idle and under concurrent HBM streams.
fn latency(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let p = probe_latency(gpu, cubin)?;
    let profile = super::gpu_common::profile_for(&gpu.name)?;
    // Each profile latency the probe measures, beside the profile's own figure, found by name
    // in the profile's one list of terms (None: the profile leaves it unset).
    let mut latencies = profile.latencies.clone();
    let set: Vec<(&str, f64)> = latencies
        .terms_mut()
        .into_iter()
        .map(|(n, v)| (n, *v))
        .collect();
    let terms: Vec<_> = p
        .profile_terms()
        .into_iter()
        .map(|t| {
            let has = set.iter().find(|(n, _)| *n == t.field).map(|&(_, v)| v);
            (t, has)
        })
        .collect();
    if json {
        let profile_terms: Vec<_> = terms
            .iter()
            .map(|(t, has)| serde_json::json!({"field": t.field, "ns": t.ns, "from": t.from, "profile_ns": has}))
            .collect();
        let cases: Vec<_> = p
            .loaded
            .iter()
            .map(|c| {
                serde_json::json!({"case": c.case, "ns": c.ns, "stream_gbps": c.stream_gbps,
                                   "release_after_store_ns": c.release.after_store_ns,
                                   "release_alone_ns": c.release.alone_ns,
                                   "placed_as_intended": c.placed_as_intended})
            })
            .collect();
        let v = serde_json::json!({"schema": super::schema("probe.latency"), "gpu": gpu.name, "idle_ns": p.idle_ns,
            "idle_release_after_store_ns": p.idle_release.after_store_ns,
            "idle_release_alone_ns": p.idle_release.alone_ns, "loaded": cases,
            "profile": profile.name, "profile_terms": profile_terms});
        outln!("{v}");
        return Ok(());
    }
    outln!(
        "L2-hit latency of a dependent chain, and a thread's wait in red.release.gpu after a store and alone, on {} (ns):",
        gpu.name
    );
    outln!(
        "  {:<60} {:>7} {:>9} {:>7}",
        "",
        "L2 hit",
        "release",
        "alone"
    );
    let r = p.idle_release;
    outln!(
        "  {:<60} {:>7.1} {:>9.1} {:>7.1}",
        "idle",
        p.idle_ns,
        r.after_store_ns,
        r.alone_ns
    );
    for c in &p.loaded {
        outln!(
            "  {:<60} {:>7.1} {:>9.1} {:>7.1}   stream {:.0} GB/s{}",
            c.case,
            c.ns,
            c.release.after_store_ns,
            c.release.alone_ns,
            c.stream_gbps,
            if c.placed_as_intended {
                ""
            } else {
                "  (the chain or the releases ran elsewhere: read with care)"
            }
        );
    }
    outln!(
        "Device-profile latencies this measures (the {} profile's beside):",
        profile.name
    );
    for (t, has) in &terms {
        let has = has.map_or_else(|| "unset".to_string(), |v| format!("{v:.1}"));
        outln!(
            "  latencies.{:<18} {:>7.1}  ({}; profile {has})",
            t.field,
            t.ns,
            t.from
        );
    }
    Ok(())
}

/// Runs the co-residency probe and prints the pairs where a rule and the GPU disagree, then
/// how often each rule agreed.
fn coresidency(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let rules = ArchRules::of(Arch::Sm90);
    let cta = |threads, registers, dynamic_smem| CtaResources {
        threads,
        registers,
        static_smem: 0,
        dynamic_smem,
    };
    let launchable = |threads, regs, smem| {
        occupancy(&rules, &cta(threads, regs, smem), Some(100)).is_ok_and(|o| o.blocks_per_sm >= 1)
    };
    let mut pairs = Vec::new();
    let name = |r: u32| format!("k_hold_{r}");
    for ra in PROBE_REGISTERS {
        for ta in RESIDENT_THREADS {
            if !launchable(ta, ra, RESIDENT_SMEM) {
                continue;
            }
            for rb in PROBE_REGISTERS {
                for tb in VISITOR_THREADS {
                    if launchable(tb, rb, 0) {
                        pairs.push(((name(ra), ta), (name(rb), tb)));
                    }
                }
            }
        }
    }
    let probes = probe_coresidency(gpu, cubin, &pairs)?;
    let verdict = |p: &PairProbe| p.admitted_beside();
    let model = |p: &PairProbe| {
        co_resident(
            &rules,
            &cta(p.resident.threads, p.resident.registers, RESIDENT_SMEM),
            1,
            &cta(p.visitor.threads, p.visitor.registers, 0),
            1,
            Some(100),
        )
    };
    // The alternative: registers shared by the whole SM, not per sub-partition.
    let whole_sm = |p: &PairProbe| {
        let regs = |t: u32, r: u32| t.div_ceil(32) * (r * 32).div_ceil(256) * 256;
        regs(p.resident.threads, p.resident.registers)
            + regs(p.visitor.threads, p.visitor.registers)
            <= rules.registers_per_sm
    };
    let agree = |rule: &dyn Fn(&PairProbe) -> bool| {
        probes
            .iter()
            .filter(|p| verdict(p) == Some(rule(p)))
            .count()
    };
    let (by_model, by_whole) = (agree(&model), agree(&whole_sm));
    if json {
        let rows: Vec<_> = probes
            .iter()
            .map(|p| {
                serde_json::json!({
                    "resident": {"threads": p.resident.threads, "registers": p.resident.registers,
                                 "dynamic_smem": RESIDENT_SMEM},
                    "visitor": {"threads": p.visitor.threads, "registers": p.visitor.registers},
                    "admitted": p.admitted, "visitors": p.visitors,
                    "model": model(p), "whole_sm_registers": whole_sm(p),
                })
            })
            .collect();
        let summary = serde_json::json!({
            "schema": super::schema("probe.coresidency"), "gpu": gpu.name, "pairs": rows,
            "model_agrees": by_model,
            "whole_sm_agrees": by_whole, "total": probes.len(),
        });
        outln!("{summary}");
        return Ok(());
    }
    outln!(
        "co-residency on {} (resident: one CTA per SM, {} B dynamic shared memory; visitor: none)",
        gpu.name,
        RESIDENT_SMEM
    );
    outln!(
        "  {} pairs; those where a rule and the GPU disagree, or the GPU admitted only some:",
        probes.len()
    );
    outln!("  resident thr x regs   visitor thr x regs   admitted   model   whole-SM rule");
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let odd = |p: &&PairProbe| {
        let v = verdict(p);
        v != Some(model(p)) || v != Some(whole_sm(p))
    };
    for p in probes.iter().filter(odd) {
        outln!(
            "  {:>12} x {:<4}  {:>12} x {:<4}  {:>4}/{:<4}  {:>5}   {}",
            p.resident.threads,
            p.resident.registers,
            p.visitor.threads,
            p.visitor.registers,
            p.admitted,
            p.visitors,
            yes_no(model(p)),
            yes_no(whole_sm(p))
        );
    }
    outln!(
        "  the simulator's rule (each warp to the sub-partition with the fewest) agrees on \
         {by_model} of {} pairs; registers shared by the whole SM on {by_whole}",
        probes.len()
    );
    Ok(())
}

/// `mkc probe sm-speeds`: each SM's streaming rate while all stream, and its speed relative
/// to the mean (docs/perf.md, leases AD and AE: dealing the persistent target's tasks by these
/// speeds was measured slower, and reverted).
fn sm_speeds(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let p = probe_sm_speeds(gpu, cubin)?;
    let mean = p.gbps.iter().sum::<f64>() / p.gbps.len().max(1) as f64;
    let speeds: Vec<f64> = p.gbps.iter().map(|r| r / mean).collect();
    if json {
        outln!(
            "{}",
            serde_json::json!({"schema": super::schema("probe.sm_speeds"), "gpu": gpu.name,
                "slots": SM_SPEED_SLOTS, "smids": p.smids, "gbps": p.gbps, "speeds": speeds,
                "total_gbps": p.total_gbps})
        );
        return Ok(());
    }
    let mut order: Vec<usize> = (0..speeds.len()).collect();
    order.sort_by(|&a, &b| speeds[a].total_cmp(&speeds[b]));
    outln!(
        "each SM's streaming rate while all {} stream ({SM_SPEED_SLOTS} bulk copies of 16 KiB in \
         flight each; medians of {SM_SPEED_REPEATS}; {:.0} GB/s in all):",
        p.smids.len(),
        mkc_ir::stats::median(p.total_gbps.clone())
    );
    let show = |rank: &usize| format!("{} ({:.3})", p.smids[*rank], speeds[*rank]);
    let n = order.len().min(12);
    let list = |ranks: &[usize]| ranks.iter().map(show).collect::<Vec<_>>().join(", ");
    outln!("  slowest {n} (smid, speed): {}", list(&order[..n]));
    outln!(
        "  fastest {n} (smid, speed): {}",
        list(&order[order.len() - n..])
    );
    Ok(())
}
