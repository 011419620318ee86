//! Timeline of the persistent target as the kernel runs it: per-SM instruction streams,
//! counter waits with signal latency, and each instruction's weights streamed through its
//! operator's page ring.
//!
//! Each SM has a loader and a consumer. When an instruction starts, the loader streams its
//! tasks' independent bytes (weights, KV history) in order, the first a load latency later,
//! never waiting on counters, as long as what is buffered and not yet consumed fits the ring
//! (`persistent_prefetch_bytes`: the kernel's page ring, or attention's KV chunk; an empty
//! ring always takes the next task, so a run larger than the ring streams through it). The
//! loader does not run ahead into the next instruction: that was the kernel's producer until
//! it got one ring across the whole stream.
//! The kernel now runs ahead and this model does not yet (a run-ahead model predicted the
//! bandwidth floor, where the kernel measures ~885 µs and 656 without its dependent work;
//! docs/perf.md). The consumer is admitted once every counter the instruction waits on is
//! complete and visible, consumes the loads as they land, and runs its dependent phase
//! (instruction overhead, the load latency of its activations, then its activations and
//! writes at the SM's bandwidth). The instruction ends when both are done; its signals leave
//! `release_ns` later (the release waits for its stores' acknowledgement), and the SM admits
//! its next instruction no sooner. Attention's compute is not modelled (docs/perf.md).

use mkc_ir::device::DeviceProfile;
use mkc_scheduler::Schedule;

use crate::engine::{next, EventQueue, Next, Pool};
use crate::timeline::{
    ablated_dependent_bytes, activation_latency, bandwidths, independent_bytes, SimOptions, Span,
    StepTimeline,
};

enum Event {
    /// Try to admit the SM's current instruction.
    Check(usize),
    /// The SM's loader may start the current instruction's loads.
    Fill(usize),
    /// The dependent phase of the SM's current instruction ends.
    Dependent(usize),
}

/// One task load of an SM's stream.
struct Load {
    /// Instruction (index in the stream) it belongs to.
    ins: usize,
    bytes: f64,
    landed: bool,
    landed_at: f64,
}

struct Sm {
    loads: Vec<Load>,
    /// First task load of each instruction (and one past the last).
    first_load: Vec<usize>,
    next_load: usize,
    loading: bool,
    buffered: f64,
    /// Loads of the current instruction consumed so far.
    consumed: usize,
    consumer: usize,
    admitted: Option<f64>,
    dependent_done: bool,
    /// When the current instruction's first load may start (a load latency after it began).
    filling_from: f64,
    /// When the consumers may admit the next instruction: the last one's release is done.
    free_at: f64,
}

/// Simulates one step at KV length `kv_len`. The chain targets' knobs (trigger,
/// co-residency, phase release) do not apply to a persistent kernel; of `options` it takes
/// the ablation only.
pub fn simulate(
    s: &Schedule,
    device: &DeviceProfile,
    options: &SimOptions,
    kv_len: u32,
) -> StepTimeline {
    let ablate = options.ablate;
    let plan = s.persistent().expect("a persistent schedule");
    let g = &s.graph;
    let lat = &device.latencies;
    let (bw, cap) = bandwidths(device);
    // What the kernel holds ahead of its consumers in an instruction of each kind: its page
    // ring, or attention's KV chunk (the chain's rings where the kernel cannot run the model).
    let ring = |kind: mkc_ir::OpKind| -> f64 {
        s.model
            .as_ref()
            .map_or(plan.resources.dynamic_smem_bytes as f64, |m| {
                mkc_catalogue::persistent_prefetch_bytes(m, kind)
                    .unwrap_or_else(|| mkc_catalogue::prefetch_bytes(m, kind))
                    as f64
            })
            .max(1.0)
    };
    let rings: Vec<f64> = g.ops.iter().map(|o| ring(o.kind)).collect();
    let mut pool: Pool<(usize, usize)> = Pool::new(bw, cap);
    let mut queue: EventQueue<Event> = EventQueue::default();
    let mut sms: Vec<Sm> = plan
        .streams
        .iter()
        .map(|st| {
            let mut loads = Vec::new();
            let mut first_load = Vec::with_capacity(st.len() + 1);
            for (i, ins) in st.iter().enumerate() {
                first_load.push(loads.len());
                for t in ins.tasks() {
                    loads.push(Load {
                        ins: i,
                        bytes: independent_bytes(g.task(t), kv_len),
                        landed: false,
                        landed_at: 0.0,
                    });
                }
            }
            first_load.push(loads.len());
            Sm {
                loads,
                first_load,
                next_load: 0,
                loading: false,
                buffered: 0.0,
                consumed: 0,
                consumer: 0,
                admitted: None,
                dependent_done: false,
                filling_from: lat.load_latency_ns,
                free_at: 0.0,
            }
        })
        .collect();
    let mut remaining: Vec<u32> = g.counters.iter().map(|c| c.signals_per_step).collect();
    let mut done_at = vec![0.0f64; g.counters.len()];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); g.counters.len()];
    let mut spans = Span::unset(g.tasks.len());

    // Starts the SM's next loads while the buffer has room.
    let try_load = |sm: usize,
                    now: f64,
                    sms: &mut Vec<Sm>,
                    pool: &mut Pool<(usize, usize)>,
                    spans: &mut Vec<Span>| {
        let st = &mut sms[sm];
        while !st.loading && st.next_load < st.loads.len() {
            let j = st.next_load;
            let bytes = st.loads[j].bytes;
            // Only the current instruction's loads, within its ring, once it has started.
            if st.loads[j].ins != st.consumer || now < st.filling_from {
                break;
            }
            let ins = &plan.streams[sm][st.loads[j].ins];
            let buffer = rings[g.task(ins.first).op.index()];
            if st.buffered > 0.0 && st.buffered + bytes > buffer {
                break;
            }
            let task = ins.first.index() + j - st.first_load[st.loads[j].ins];
            spans[task].load_start = now;
            st.next_load += 1;
            if bytes > 0.0 {
                st.buffered += bytes;
                st.loading = true;
                pool.start(now, bytes, (sm, j));
            } else {
                st.loads[j].landed = true;
                st.loads[j].landed_at = now;
            }
        }
    };
    // Consumes the landed loads of the admitted instruction, in order; true when all are.
    let consume = |st: &mut Sm| -> bool {
        let (lo, hi) = (st.first_load[st.consumer], st.first_load[st.consumer + 1]);
        while lo + st.consumed < hi && st.loads[lo + st.consumed].landed {
            st.buffered -= st.loads[lo + st.consumed].bytes;
            st.consumed += 1;
        }
        lo + st.consumed == hi
    };

    for sm in 0..sms.len() {
        queue.push(lat.load_latency_ns, Event::Fill(sm));
        queue.push(0.0, Event::Check(sm));
    }
    let mut end = 0.0f64;
    // Ends the SM's current instruction at `now` if its loads and dependent phase are done.
    macro_rules! maybe_finish {
        ($sm:expr, $now:expr) => {{
            let (sm, now) = ($sm, $now);
            let st = &mut sms[sm];
            if st.admitted.is_some() && st.dependent_done && consume(st) {
                let ins = &plan.streams[sm][st.consumer];
                let admitted = st.admitted.expect("admitted");
                // A task of the run starts once admitted and loading, ends once its load
                // landed; the last one ends with the instruction.
                for (k, t) in ins.tasks().enumerate() {
                    let load = &st.loads[st.first_load[st.consumer] + k];
                    let span = &mut spans[t.index()];
                    span.start = admitted.max(span.load_start);
                    span.end = if k + 1 == ins.count as usize {
                        now
                    } else {
                        span.start.max(load.landed_at)
                    };
                    span.sm = sm as u32;
                    span.task = t;
                }
                end = end.max(now);
                // The release: the signals leave once the SM's stores are acknowledged, and
                // the consumers wait for it at the end barrier before the next instruction.
                let released = now + lat.release_ns;
                for sig in &ins.signals {
                    let c = sig.counter.index();
                    remaining[c] -= sig.count;
                    done_at[c] = done_at[c].max(released);
                    if remaining[c] == 0 {
                        for w in std::mem::take(&mut waiting[c]) {
                            queue.push(released, Event::Check(w));
                        }
                    }
                }
                st.consumer += 1;
                st.consumed = 0;
                st.admitted = None;
                st.dependent_done = false;
                // The next instruction sets up its ring and issues its first pages now; they
                // start landing a load latency later.
                st.filling_from = now + lat.load_latency_ns;
                st.free_at = released;
                queue.push(st.filling_from, Event::Fill(sm));
                queue.push(released, Event::Check(sm));
            }
        }};
    }
    while let Some(item) = next(&mut queue, &mut pool) {
        match item {
            Next::Flow(now, (sm, j)) => {
                let st = &mut sms[sm];
                st.loads[j].landed = true;
                st.loads[j].landed_at = now;
                st.loading = false;
                if st.admitted.is_some() {
                    consume(st);
                }
                try_load(sm, now, &mut sms, &mut pool, &mut spans);
                maybe_finish!(sm, now);
            }
            Next::Event(now, Event::Check(sm)) => {
                let st = &sms[sm];
                if st.admitted.is_some() || st.consumer >= plan.streams[sm].len() {
                    continue;
                }
                let ins = &plan.streams[sm][st.consumer];
                let mut ready = now.max(st.free_at);
                let mut blocked = false;
                for w in ins.waits.iter().filter(|_| !ablate.waits) {
                    let c = w.counter.index();
                    if remaining[c] > 0 {
                        waiting[c].push(sm);
                        blocked = true;
                        break;
                    }
                    ready = ready.max(done_at[c] + lat.signal_visible_ns);
                }
                if blocked {
                    continue;
                }
                if ready > now {
                    queue.push(ready, Event::Check(sm));
                    continue;
                }
                let kind = g.op(g.task(ins.first).op).kind;
                let dependent =
                    ablated_dependent_bytes(&ablate, kind, ins.tasks().map(|t| g.task(t)));
                let st = &mut sms[sm];
                st.admitted = Some(now);
                consume(st);
                try_load(sm, now, &mut sms, &mut pool, &mut spans);
                // As in a chain CTA: activations read after the wait land a load latency
                // later.
                let activations = activation_latency(&ablate, kind, device);
                let duration = lat.instruction_overhead_ns + activations + dependent / cap;
                queue.push(now + duration, Event::Dependent(sm));
            }
            Next::Event(now, Event::Fill(sm)) => {
                try_load(sm, now, &mut sms, &mut pool, &mut spans);
            }
            Next::Event(now, Event::Dependent(sm)) => {
                sms[sm].dependent_done = true;
                maybe_finish!(sm, now);
            }
        }
    }
    StepTimeline {
        step_ns: end + lat.launch_gap_ns,
        spans,
    }
}
