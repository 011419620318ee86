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
//! A fused grid (two operators, a grid-wide barrier between them) is timed as two sub-grids:
//! the second's CTAs are admitted with the first's, share its SMs (they are the same CTAs in
//! the kernel, streaming the second operator's weights behind the first's), and start their
//! dependent phase once every CTA of the first has ended plus `signal_visible_ns`.

use mkc_ir::device::DeviceProfile;
use mkc_ir::OpId;
use mkc_scheduler::schedule::{ChainPlan, EdgeSync};
use mkc_scheduler::{Schedule, Target, Trigger};

use crate::engine::{next, EventQueue, Next, Pool};
use crate::occupancy::{occupancy, ArchRules, CtaResources};
use crate::timeline::{
    bandwidths, dependent_bytes, independent_bytes, SimOptions, Span, StepTimeline,
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
}

/// How a sub-grid is linked to the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    /// A grid boundary (`None` for the step's first grid).
    Edge(Option<EdgeSync>),
    /// The second operator of a fused grid: behind the first's grid-wide barrier.
    Barrier,
}

/// One operator's CTAs as the timeline admits them: a grid, or half of a fused grid.
struct SubGrid {
    op: OpId,
    ctas: u32,
    /// Index of the plan's grid (for its occupancy and trigger).
    kernel: usize,
    link: Link,
    waits: bool,
}

/// The plan's grids as sub-grids, in launch order.
fn sub_grids(plan: &ChainPlan, g: &mkc_ir::TaskGraph) -> Vec<SubGrid> {
    let mut out = Vec::new();
    for (i, k) in plan.kernels.iter().enumerate() {
        out.push(SubGrid {
            op: k.op,
            ctas: k.ctas,
            kernel: i,
            link: Link::Edge(k.incoming),
            waits: k.wait.is_some(),
        });
        if let Some(t) = k.then {
            out.push(SubGrid {
                op: t,
                ctas: g.op(t).tasks,
                kernel: i,
                link: Link::Barrier,
                waits: true,
            });
        }
    }
    out
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
                            static_smem: 0,
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
    let kernel_slots = slots_per_sm(s, device, options);
    let subs = sub_grids(plan, g);
    let slots: Vec<u32> = subs.iter().map(|sg| kernel_slots[sg.kernel]).collect();
    let n_sms = device.sms as usize;
    let mut pool: Pool<(usize, u32, usize)> = Pool::new(bw, cap);
    let mut queue: EventQueue<Event> = EventQueue::default();
    let mut grids: Vec<Grid> = subs.iter().map(|_| Grid::default()).collect();
    let mut used = vec![0u32; n_sms];
    // Grid occupying each SM (for the no-co-residency rule) and how many of its CTAs are there.
    let mut owner: Vec<Option<(usize, u32)>> = vec![None; n_sms];
    let mut spans = Span::unset(g.tasks.len());
    let task_of = |k: usize, cta: u32| g.op(subs[k].op).first_task.0 + cta;
    // The second half of a fused grid triggers with the first (the kernel's trigger is one).
    let trigger = |k: usize| {
        plan.kernels[subs[k].kernel]
            .trigger
            .map(|t| options.trigger.unwrap_or(t))
            .filter(|_| subs.get(k + 1).is_none_or(|n| n.link != Link::Barrier))
    };
    // A CTA of grid k triggered: once all have, a programmatic successor becomes admissible.
    let count_trigger =
        |k: usize, now: f64, grids: &mut Vec<Grid>, queue: &mut EventQueue<Event>| {
            grids[k].triggered += 1;
            if grids[k].triggered == subs[k].ctas
                && k + 1 < grids.len()
                && subs[k + 1].link == Link::Edge(Some(EdgeSync::Programmatic))
            {
                queue.push(now, Event::Admissible(k + 1));
            }
        };
    // A CTA whose loads landed and whose wait is released runs its dependent phase.
    let start_dependent = |k: usize,
                           cta: u32,
                           sm: usize,
                           now: f64,
                           spans: &mut Vec<Span>,
                           queue: &mut EventQueue<Event>| {
        let t = &g.tasks[task_of(k, cta) as usize];
        let d = lat.instruction_overhead_ns + dependent_bytes(t) / cap;
        spans[t.id.index()].start = now;
        queue.push(now + d, Event::Exit(k, cta, sm));
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
        let Some(k) = (0..grids.len()).find(|&k| grids[k].next_cta < subs[k].ctas) else {
            return;
        };
        if !grids[k].admissible {
            return;
        }
        // A fused grid's second half runs in the first half's CTAs: it has slots of its own
        // and may share the first half's SMs.
        let partner = (subs[k].link == Link::Barrier).then(|| k - 1);
        let limit = slots[k] + partner.map_or(0, |p| slots[p]);
        for sm in 0..used.len() {
            while used[sm] < limit && grids[k].next_cta < subs[k].ctas {
                if !options.coresidency {
                    if let Some((o, count)) = owner[sm] {
                        if o != k && Some(o) != partner && count > 0 {
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
                if subs[k].link != Link::Barrier && (!pdl || !subs[k].waits) {
                    grids[k].released = true;
                }
                // A fused grid's second half is admitted with its first.
                if subs.get(k + 1).is_some_and(|n| n.link == Link::Barrier) {
                    queue.push(now, Event::Admissible(k + 1));
                }
                admit(now, &mut grids, &mut used, &mut owner, &mut queue, 0.0);
            }
            Next::Event(now, Event::Start(k, cta, sm)) => {
                let t = task_of(k, cta) as usize;
                spans[t].task = mkc_ir::TaskId(t as u32);
                spans[t].sm = sm as u32;
                spans[t].load_start = now;
                pool.start(now, independent_bytes(&g.tasks[t], kv_len), (k, cta, sm));
                if trigger(k) == Some(Trigger::Early) {
                    count_trigger(k, now, &mut grids, &mut queue);
                }
            }
            Next::Flow(now, (k, cta, sm)) => {
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
                let t = task_of(k, cta) as usize;
                spans[t].end = now;
                end = end.max(now);
                if !options.phase_release {
                    queue.push(now, Event::Free(k, sm));
                }
                grids[k].exited += 1;
                if trigger(k) == Some(Trigger::Late) {
                    count_trigger(k, now, &mut grids, &mut queue);
                }
                if grids[k].exited == subs[k].ctas && k + 1 < grids.len() {
                    match subs[k + 1].link {
                        Link::Barrier => {
                            queue.push(now + lat.signal_visible_ns, Event::Release(k + 1))
                        }
                        Link::Edge(Some(EdgeSync::Programmatic)) => {
                            queue.push(now + lat.pdl_wait_release_ns, Event::Release(k + 1))
                        }
                        Link::Edge(_) => {
                            queue.push(now + lat.launch_gap_ns, Event::Admissible(k + 1))
                        }
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
