//! Timeline of the chain targets (`pdl`, `graph`): grids of CTAs admitted onto SM slots.
//!
//! `graph`: a grid is admitted once its predecessor has completed, plus the launch gap.
//! `pdl`: a grid with the PDL attribute is admitted once every CTA of its predecessor has
//! triggered (early: right after issuing its independent loads; late: at exit); its CTAs issue
//! their independent loads at once and wait before their dependent reads until the predecessor
//! completes, plus the wait-release latency. CTAs enter an SM `cta_admission_ns` after a slot
//! frees. Without co-residency an SM holds CTAs of one grid at a time (the measured "rolling
//! tail wave"); with phase-scoped release a CTA frees its slot when its loads are done.
//!
//! A CTA runs its run of tasks (the plan's `runs`, as the kernels divide them). Before its
//! wait it loads what its page ring holds (`prefetch_bytes`) of its tasks' weights and KV
//! history; after it, the rest of its weights, each distinct input once, and every task's
//! output. Both phases' bytes flow through the shared bandwidth pool; a CTA's first pages land
//! the chain load latency (`Latencies::chain_load_latency`) after it issues them, and its
//! activations, read after the release, land that latency after the release (an O-projection
//! merging split-KV records `kv_merge_ns` later; the CTA exits after both).

use mkc_catalogue::Ablation;
use mkc_ir::device::DeviceProfile;
use mkc_scheduler::schedule::{ChainPlan, EdgeSync};
use mkc_scheduler::{Schedule, Target, Trigger};

use crate::engine::{next, EventQueue, Next, Pool};
use crate::occupancy::{occupancy, ArchRules, CtaResources};
use crate::timeline::{
    ablated_dependent_bytes, activation_latency, attention_extra_chunks_ns, bandwidths,
    independent_bytes, merge_ns, SimOptions, Span, StepTimeline,
};

enum Event {
    /// A grid becomes admissible.
    Admissible(usize),
    /// A CTA of grid `k` starts on `sm` (task index within the grid).
    Start(usize, u32, usize),
    /// Grid `k`'s wait is released.
    Release(usize),
    /// A CTA's dependent phase ends.
    Exit(usize, u32, usize),
    /// A slot of grid `k` on `sm` frees.
    Free(usize, usize),
    /// The first bytes of a CTA's loads land (the chain load latency after it issued them): its
    /// flow joins the bandwidth pool. The flag marks its dependent (second) phase.
    Land(usize, u32, usize, bool),
}

/// The bytes one CTA moves: before its wait (at most what it holds: its page ring), and after
/// (the rest of its weights, its activations and its writes).
#[derive(Clone, Copy, Debug, Default)]
struct CtaBytes {
    early: f64,
    late: f64,
}

/// The bytes of every CTA of every grid at KV length `kv_len`, less what `ablate` removes.
fn cta_bytes(
    plan: &ChainPlan,
    g: &mkc_ir::TaskGraph,
    kv_len: u32,
    ablate: &Ablation,
) -> Vec<Vec<CtaBytes>> {
    plan.kernels
        .iter()
        .map(|k| {
            let first = g.op(k.op).first_task;
            let kind = g.op(k.op).kind;
            (0..k.runs.len())
                .map(|c| {
                    let tasks = || k.cta_task_range(first, c).map(|t| &g.tasks[t as usize]);
                    let independent: f64 = tasks().map(|t| independent_bytes(t, kv_len)).sum();
                    let dependent = ablated_dependent_bytes(ablate, kind, tasks());
                    let early = independent.min(k.prefetch_bytes as f64);
                    CtaBytes {
                        early,
                        late: independent - early + dependent,
                    }
                })
                .collect()
        })
        .collect()
}

#[derive(Default)]
struct Grid {
    admissible: bool,
    next_cta: u32,
    triggered: u32,
    exited: u32,
    released: bool,
    /// CTAs whose loads are done, waiting for the release: (cta, sm).
    parked: Vec<(u32, usize)>,
}

/// CTA slots per SM of every grid of a chain schedule (its occupancy; at least 1).
pub fn slots_per_sm(s: &Schedule, device: &DeviceProfile, options: &SimOptions) -> Vec<u32> {
    let rules = ArchRules::for_device(device);
    s.chain()
        .map(|c| {
            c.kernels
                .iter()
                .map(|k| {
                    occupancy(
                        &rules,
                        &CtaResources {
                            threads: k.threads,
                            registers: k.registers,
                            static_smem: k.static_smem_bytes,
                            dynamic_smem: k.dynamic_smem_bytes,
                        },
                        options.carveout_pct,
                    )
                    .map_or(1, |o| o.blocks_per_sm.max(1))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Simulates one step at KV length `kv_len`.
pub fn simulate(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    kv_len: u32,
) -> StepTimeline {
    let plan = s.chain().expect("a chain schedule");
    let g = &s.graph;
    let lat = &device.latencies;
    let pdl = s.target == Target::Pdl;
    let (bw, cap) = bandwidths(device);
    let slots = slots_per_sm(s, device, options);
    let ablate = options.ablate;
    let bytes = cta_bytes(plan, g, kv_len, &ablate);
    // Attention's KV chunks past the first, in the chain kernel's chunk.
    let attention_chunks_ns = attention_extra_chunks_ns(
        s.model.as_ref(),
        s.model.as_ref().map(mkc_catalogue::attention_chunk),
        kv_len,
        &ablate,
        device,
    );
    let kernels = &plan.kernels;
    let n_sms = device.sms as usize;
    // Flows carry their CTA and whether they are its dependent (second) phase.
    let mut pool: Pool<(usize, u32, usize, bool)> = Pool::new(bw, cap);
    let mut queue: EventQueue<Event> = EventQueue::default();
    let mut grids: Vec<Grid> = kernels.iter().map(|_| Grid::default()).collect();
    let mut used = vec![0u32; n_sms];
    // Grid occupying each SM (for the no-co-residency rule) and how many of its CTAs are there.
    let mut owner: Vec<Option<(usize, u32)>> = vec![None; n_sms];
    let mut spans = Span::unset(g.tasks.len());
    let tasks_of = |k: usize, cta: u32| {
        kernels[k].cta_task_range(g.op(kernels[k].op).first_task, cta as usize)
    };
    let trigger = |k: usize| kernels[k].trigger.map(|t| options.trigger.unwrap_or(t));
    // A CTA of grid k triggered: once all have, a programmatic successor becomes admissible.
    let count_trigger =
        |k: usize, now: f64, grids: &mut Vec<Grid>, queue: &mut EventQueue<Event>| {
            grids[k].triggered += 1;
            if grids[k].triggered == kernels[k].ctas
                && k + 1 < grids.len()
                && kernels[k + 1].incoming == Some(EdgeSync::Programmatic)
            {
                queue.push(now, Event::Admissible(k + 1));
            }
        };
    // A CTA whose early loads landed and whose wait is released runs its dependent phase:
    // the rest of its weights stream on, and its activations, read only now, land a load
    // latency after the release (its exit waits for both).
    let start_dependent = |k: usize,
                           cta: u32,
                           sm: usize,
                           now: f64,
                           spans: &mut Vec<Span>,
                           queue: &mut EventQueue<Event>| {
        for t in tasks_of(k, cta) {
            spans[t as usize].start = now;
        }
        queue.push(now, Event::Land(k, cta, sm, true));
    };
    let mut end = 0.0f64;
    queue.push(0.0, Event::Admissible(0));

    // Admits CTAs of the lowest grid with CTAs left, if admissible, onto free slots.
    let admit = |now: f64,
                 grids: &mut Vec<Grid>,
                 used: &mut Vec<u32>,
                 owner: &mut Vec<Option<(usize, u32)>>,
                 queue: &mut EventQueue<Event>,
                 delay: f64| {
        let Some(k) = (0..grids.len()).find(|&k| grids[k].next_cta < kernels[k].ctas) else {
            return;
        };
        if !grids[k].admissible {
            return;
        }
        for sm in 0..used.len() {
            while used[sm] < slots[k] && grids[k].next_cta < kernels[k].ctas {
                if !options.coresidency {
                    if let Some((o, count)) = owner[sm] {
                        if o != k && count > 0 {
                            break;
                        }
                    }
                }
                used[sm] += 1;
                owner[sm] = match owner[sm] {
                    Some((o, c)) if o == k => Some((k, c + 1)),
                    _ => Some((k, 1)),
                };
                let cta = grids[k].next_cta;
                grids[k].next_cta += 1;
                queue.push(now + delay, Event::Start(k, cta, sm));
            }
        }
    };

    while let Some(item) = next(&mut queue, &mut pool) {
        match item {
            Next::Event(now, Event::Admissible(k)) => {
                grids[k].admissible = true;
                if !pdl || kernels[k].wait.is_none() || ablate.waits {
                    grids[k].released = true;
                }
                admit(now, &mut grids, &mut used, &mut owner, &mut queue, 0.0);
            }
            Next::Event(now, Event::Start(k, cta, sm)) => {
                for t in tasks_of(k, cta) {
                    let span = &mut spans[t as usize];
                    span.task = mkc_ir::TaskId(t);
                    span.sm = sm as u32;
                    span.load_start = now;
                }
                queue.push(
                    now + lat.chain_load_latency(),
                    Event::Land(k, cta, sm, false),
                );
                if trigger(k) == Some(Trigger::Early) {
                    count_trigger(k, now, &mut grids, &mut queue);
                }
            }
            Next::Event(now, Event::Land(k, cta, sm, late)) => {
                let b = &bytes[k][cta as usize];
                pool.start(now, if late { b.late } else { b.early }, (k, cta, sm, late));
            }
            Next::Flow(now, (k, cta, sm, true)) => {
                // The first task's dependent phase started at the release.
                let released = spans[tasks_of(k, cta).start as usize].start;
                let kind = g.op(kernels[k].op).kind;
                let activations = activation_latency(&ablate, kind, lat.chain_load_latency())
                    + merge_ns(s.model.as_ref(), kind, &ablate, device);
                let chunks = if kind == mkc_ir::OpKind::Attention {
                    attention_chunks_ns
                } else {
                    0.0
                };
                let done = now.max(released + activations) + chunks;
                queue.push(done + lat.instruction_overhead_ns, Event::Exit(k, cta, sm));
            }
            Next::Flow(now, (k, cta, sm, false)) => {
                if options.phase_release {
                    queue.push(now, Event::Free(k, sm));
                }
                if grids[k].released {
                    start_dependent(k, cta, sm, now, &mut spans, &mut queue);
                } else {
                    grids[k].parked.push((cta, sm));
                }
            }
            Next::Event(now, Event::Release(k)) => {
                grids[k].released = true;
                for (cta, sm) in std::mem::take(&mut grids[k].parked) {
                    start_dependent(k, cta, sm, now, &mut spans, &mut queue);
                }
            }
            Next::Event(now, Event::Exit(k, cta, sm)) => {
                for t in tasks_of(k, cta) {
                    spans[t as usize].end = now;
                }
                end = end.max(now);
                if !options.phase_release {
                    queue.push(now, Event::Free(k, sm));
                }
                grids[k].exited += 1;
                if trigger(k) == Some(Trigger::Late) {
                    count_trigger(k, now, &mut grids, &mut queue);
                }
                if grids[k].exited == kernels[k].ctas && k + 1 < grids.len() {
                    match kernels[k + 1].incoming {
                        Some(EdgeSync::Programmatic) => {
                            queue.push(now + lat.pdl_wait_release_ns, Event::Release(k + 1))
                        }
                        _ => queue.push(now + lat.launch_gap_ns, Event::Admissible(k + 1)),
                    }
                }
            }
            Next::Event(now, Event::Free(k, sm)) => {
                used[sm] -= 1;
                if let Some((o, c)) = owner[sm] {
                    if o == k {
                        owner[sm] = Some((k, c - 1));
                    }
                }
                admit(
                    now,
                    &mut grids,
                    &mut used,
                    &mut owner,
                    &mut queue,
                    lat.cta_admission_ns,
                );
            }
        }
    }
    StepTimeline {
        step_ns: end + lat.launch_gap_ns,
        spans,
    }
}
