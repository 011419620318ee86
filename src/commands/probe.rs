//! `mkc probe`: hardware facts the simulator assumes, measured on the GPU: which pairs of kernels
//! share an SM (against the simulator's co-residency rule), L2 latency under load, L2 as a weight
//! source, and two matvec engines alone.

use mkc_backend::gpu::{
    probe_coresidency, probe_l2, probe_latency, probe_matvec, Gpu, PairProbe, L2_MIXED_MIB,
    L2_REPEATS, L2_WARMERS, MATVEC_REPEATS, PROBE_REGISTERS, RESIDENT_SMEM,
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
    let gpu = Gpu::open()?;
    if gpu.cc != (9, 0) {
        return Err(CommandError::Input(format!(
            "mkc probe measures sm_90 (H100/H200); {} is sm_{}{}",
            gpu.name, gpu.cc.0, gpu.cc.1
        )));
    }
    let compiled = kernels::compile_probe("sm_90a")?;
    match args.what {
        ProbeWhat::Coresidency => coresidency(&gpu, &compiled.cubin, args.json),
        ProbeWhat::Latency => latency(&gpu, &compiled.cubin, args.json),
        ProbeWhat::L2 => l2(&gpu, &compiled.cubin, args.json),
        ProbeWhat::Matvec => matvec(&gpu, &compiled.cubin, args.json),
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
        println!("{}", serde_json::json!({"gpu": gpu.name, "shapes": v}));
    } else {
        println!(
            "y = W x alone, one CTA per SM, cold L2, on {} (µs, median of {MATVEC_REPEATS}; GB/s):",
            gpu.name
        );
        println!("  operator        rows x K        plain loads           bulk copies   rel L2 (loads, bulk)");
        for r in &rows {
            let mb = r.rows as f64 * r.k as f64 * 2.0 / 1000.0;
            println!(
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
        println!(
            "{}",
            serde_json::json!({"gpu": gpu.name, "rows": rows, "warmed": warmed, "mixed": mixed})
        );
        return Ok(());
    }
    println!(
        "pages of 16 KiB streamed by one CTA per SM on {} (GB/s, median of {L2_REPEATS}):",
        gpu.name
    );
    println!(
        "  MiB  in flight  from HBM  L2 (same CTA read)  L2 (other CTA read)  L2 (prefetched)"
    );
    for r in &p.rows {
        println!(
            "  {:>3}  {:>9}  {:>8.0}  {:>18.0}  {:>19.0}  {:>15.0}",
            r.mib, r.slots, r.cold_gbps, r.warm_gbps, r.warm_other_gbps, r.prefetched_gbps
        );
    }
    println!("the same read (4 in flight) after another grid warmed L2 (GB/s):");
    for w in &p.warmed {
        println!(
            "  {:<45} {:>3} MiB  {:>6.0}",
            L2_WARMERS[w.how], w.mib, w.gbps
        );
    }
    println!("{L2_MIXED_MIB} MiB read with part of every CTA's pages warmed by loads (GB/s):");
    for m in &p.mixed {
        let which = match (m.stride, m.last) {
            (0, false) => format!("first {}/4", m.warm_quarters),
            (0, true) => format!("last {}/4", m.warm_quarters),
            (s, _) => format!("every {s}th page"),
        };
        println!(
            "  {} in flight, {which:<14} warmed  {:>6.0}",
            m.slots, m.gbps
        );
    }
    Ok(())
}

/// Prints the L2 latency of a dependent chain, idle and under concurrent HBM streams.
fn latency(gpu: &Gpu, cubin: &[u8], json: bool) -> Result<(), CommandError> {
    let p = probe_latency(gpu, cubin)?;
    if json {
        let cases: Vec<_> = p
            .loaded
            .iter()
            .map(|c| {
                serde_json::json!({"case": c.case, "ns": c.ns, "stream_gbps": c.stream_gbps,
                                   "placed_as_intended": c.placed_as_intended})
            })
            .collect();
        let v = serde_json::json!({"gpu": gpu.name, "idle_ns": p.idle_ns, "loaded": cases});
        println!("{v}");
        return Ok(());
    }
    println!(
        "L2-hit latency of a dependent chain on {} (ns per link):",
        gpu.name
    );
    println!("  {:<60} {:>7.1}", "idle", p.idle_ns);
    for c in &p.loaded {
        println!(
            "  {:<60} {:>7.1}   stream {:.0} GB/s{}",
            c.case,
            c.ns,
            c.stream_gbps,
            if c.placed_as_intended {
                ""
            } else {
                "  (the chain ran elsewhere: read with care)"
            }
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
            "gpu": gpu.name, "pairs": rows, "model_agrees": by_model,
            "whole_sm_agrees": by_whole, "total": probes.len(),
        });
        println!("{summary}");
        return Ok(());
    }
    println!(
        "co-residency on {} (resident: one CTA per SM, {} B dynamic shared memory; visitor: none)",
        gpu.name, RESIDENT_SMEM
    );
    println!(
        "  {} pairs; those where a rule and the GPU disagree, or the GPU admitted only some:",
        probes.len()
    );
    println!("  resident thr x regs   visitor thr x regs   admitted   model   whole-SM rule");
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let odd = |p: &&PairProbe| {
        let v = verdict(p);
        v != Some(model(p)) || v != Some(whole_sm(p))
    };
    for p in probes.iter().filter(odd) {
        println!(
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
    println!(
        "  the simulator's rule (each warp to the sub-partition with the fewest) agrees on \
         {by_model} of {} pairs; registers shared by the whole SM on {by_whole}",
        probes.len()
    );
    Ok(())
}
