//! Timeline of the persistent target as the kernel runs it: per-SM instruction streams, a
//! producer that runs ahead across instructions, counter waits with signal latency, and a
//! dependent phase that the consumers run before they may use their pages.
//!
//! Each SM has a loader and a consumer. The loader walks the SM's whole stream in order, as the
//! kernel's producer lane does: a matvec task's weights go into the page ring page by page (the
//! kernel's slots, one page each, a page carrying its operator's rows of a K chunk: 12 KiB of
//! a 16 KiB slot for 3072-column rows), attention's KV history into its own region, which
//! holds one attention instruction's history and is free again once the previous attention
//! instruction has ended; the history moves beside the pages, not ahead of them (the producer
//! issues its copies and goes on). It never waits on a counter, only for room: a full
//! ring stops it until the consumers free a page, and its next page then lands
//! `load_latency_ns` later (the pipe refills); and its loop hands out a page no sooner than
//! `page_loop_ns` after the last (binding only where a page's copy is shorter: the weights
//! ablated). The consumer is admitted once every counter the instruction waits on is complete
//! and visible and its previous instruction has released; it then stages its activations
//! (instruction overhead, the load latency, its activations and writes at the SM's bandwidth;
//! the activations queue behind the copies per SM the producer then keeps in flight, the
//! boundary hold's inside the window, the stream cap's where the operator reads them in its
//! page loop, after it: [`input_latency`]; an O-projection merging split-KV records adds
//! `kv_merge_ns`) and only then uses its pages as they land, freeing
//! their ring room; its consumer warps take the pages in turn, each `page_compute_ns` per page
//! (`page_compute_mma_ns` where the loop runs on the tensor cores), a page no
//! sooner than it landed (the room is freed as a page is taken, not when its products are
//! done: a little optimistic for the loader). Attention computes (scores, softmax, output:
//! `attention_task_ns` plus `attention_head_ns` per query head of the task, scaled by its head
//! dimension against the measured 64; from the chain kernel's clock marks) once staged and its
//! history landed. The instruction ends when all of that is done (its last page's products,
//! or attention's compute); its signals leave `release_ns` later (the release waits for its
//! stores' acknowledgement), and the SM admits its next instruction no sooner. The SMs share
//! the card's bandwidth, each at most its speed's share (`fast_sms`): a stand-in for what the
//! boundary hold costs the stream (see `simulate`).

use mkc_ir::device::DeviceProfile;
use mkc_scheduler::Schedule;

use crate::engine::{next, EventQueue, Next, Pool};
use crate::timeline::{
    ablated_dependent_bytes, activation_latency, attention_extra_chunks_ns, bandwidths, merge_ns,
    pages_in, PageMath, SimOptions, Span, StepTimeline,
};

enum Event {
    /// Try to admit the SM's current instruction.
    Check(usize),
    /// The SM's loader may issue its next loads.
    Fill(usize),
    /// The current instruction's activations are staged.
    Staged(usize),
    /// The current instruction finishes computing (attention, or its pages' products).
    Computed(usize),
    /// A weight page that warming left in L2 lands from there (SM, load).
    Landed(usize, usize),
}

/// How much faster than its share of HBM an SM reads pages that L2 holds: `mkc probe l2` read
/// them at 1.6-1.75x (docs/perf.md, eighth session).
const L2_WARM_SPEEDUP: f64 = 1.7;

/// One load of an SM's stream: a weight page of a matvec task (the producer issues pages one
/// by one), or an attention task's KV history.
struct Load {
    /// Instruction (index in the stream) it belongs to.
    ins: usize,
    /// The task it belongs to, and whether it is that task's last load.
    task: usize,
    last_of_task: bool,
    bytes: f64,
    /// Attention's KV history (its own region), not weight pages (the ring).
    kv: bool,
    landed: bool,
    landed_at: f64,
    /// Warming read it into L2 (`tuning.persistent_warm_pages`): its copy reads L2.
    warmed: bool,
}

struct Sm {
    loads: Vec<Load>,
    /// First task load of each instruction (and one past the last).
    first_load: Vec<usize>,
    /// The attention instruction before each instruction (its KV region's last user).
    prev_attention: Vec<Option<usize>>,
    next_load: usize,
    /// A weight page is in flight (the loader issues them one at a time; the KV history
    /// moves beside them).
    loading: bool,
    /// The loader stopped for room; its next load starts a load latency after room frees.
    stalled: bool,
    /// A warm read is in flight (one at a time).
    warming: bool,
    /// When the loader may issue again (after a refill latency).
    resume_at: f64,
    /// The earliest its producer's loop can hand out the next weight page (`page_loop_ns`
    /// after the last).
    paced_at: f64,
    /// Ring slots holding a page no consumer has taken yet.
    ring_used: usize,
    /// Loads of the current instruction consumed so far.
    consumed: usize,
    consumer: usize,
    admitted: Option<f64>,
    staged: bool,
    /// Its consumer warps' page math.
    math: PageMath,
    computing: bool,
    /// When the consumers may admit the next instruction: the last one's release is done.
    free_at: f64,
}

/// How long after its wait a persistent instruction of `kind` has its input: an L2 round trip
/// behind the copies per SM its producer then keeps in flight
/// (`Latencies::load_latency_beside`), at most the ring's `slots`. An operator that stages its
/// input reads it inside the boundary window (`tuning.persistent_boundary_inflight` copies);
/// one that reads it in its page loop (the O-projection and down with K chunks in registers:
/// `mkc_catalogue::staged_input` 0) reads it after the window has closed, behind the stream
/// cap's (`tuning.persistent_stream_inflight`). (With the held window alone, lease AU's held
/// ladder put 40 µs in the activation loads against 54 measured, where one held latency for
/// all put 11; docs/perf.md.)
pub fn input_latency(
    model: Option<&mkc_ir::Model>,
    kind: mkc_ir::OpKind,
    slots: usize,
    device: &DeviceProfile,
) -> f64 {
    let unset = mkc_ir::model::Tuning::default();
    let tuning = model.map_or(&unset, |m| &m.tuning);
    let in_page_loop = model.is_some_and(|m| {
        mkc_ir::work::matvec(m, kind).is_some_and(|w| mkc_catalogue::staged_input(m, kind, &w) == 0)
    });
    let limit = if in_page_loop {
        mkc_catalogue::persistent_stream_inflight(tuning)
    } else {
        mkc_catalogue::persistent_boundary_inflight(tuning)
    };
    let copies = limit.min(u32::try_from(slots).unwrap_or(u32::MAX));
    device.latencies.load_latency_beside(copies)
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
    // The pages the kernel's ring holds ahead of its consumers: its slots, one page each
    // whatever the page carries (where the kernel cannot run the model, the chain's down ring
    // in pages). Attention's KV history has a region of its own, which the loader's order, not
    // its size, limits.
    let ring_slots = s
        .model
        .as_ref()
        .map_or(
            plan.resources.dynamic_smem_bytes / mkc_ir::model::Lowering::default().page_bytes,
            |m| match mkc_catalogue::persistent_layout(m) {
                Ok(l) => l.slots,
                Err(_) => mkc_catalogue::stream(m, mkc_ir::OpKind::Down).map_or(1, |st| st.slots()),
            },
        )
        .max(1) as usize;
    let kind_of = |t: mkc_ir::TaskId| g.op(g.task(t).op).kind;
    // Tasks that compute attention (attention's, or the O-projection's with attention inside)
    // read a KV history.
    let reads_history = |t: mkc_ir::TaskId| g.task(t).cost.kv_bytes_per_token > 0;
    // Attention's KV chunks past the first, in the persistent layout's chunk.
    let attention_chunks_ns = attention_extra_chunks_ns(
        s.model.as_ref(),
        s.model.as_ref().and_then(|m| {
            mkc_catalogue::persistent_layout(m)
                .ok()
                .map(|l| l.attention_chunk(m))
        }),
        kv_len,
        &ablate,
        device,
    );
    // One attention task's compute (scores, softmax, output), each query head's work scaled by
    // its dimension; none under the attention ablation.
    let attention_ns = if ablate.attention {
        0.0
    } else {
        let (heads, head_dim) = s
            .model
            .as_ref()
            .map_or((1, mkc_ir::device::ATTENTION_HEAD_DIM), |m| {
                (m.heads_per_attention_task(), m.geometry.head_dim)
            });
        let per_head =
            lat.attention_head_ns * head_dim as f64 / mkc_ir::device::ATTENTION_HEAD_DIM as f64;
        lat.attention_task_ns + per_head * heads as f64 + attention_chunks_ns
    };
    // The boundary hold (`tuning.persistent_boundary_inflight` below the ring's slots): the
    // producer issues no fresh copy ahead of the release's acknowledgement, so the release is
    // the held one, and inputs staged inside the window land sooner (input_latency). Its
    // other effects (shorter waits, a later refill) are not modelled: the H100's trace puts
    // three quarters of its gain in the release (perf.md).
    // The cap outside the window (`tuning.persistent_stream_inflight`) sets the page loop's
    // read latency (input_latency) and nothing else here: this loader keeps one page per SM in
    // flight, sharing the pool's bandwidth, whatever it is.
    let held = s.model.as_ref().is_some_and(|m| {
        (mkc_catalogue::persistent_boundary_inflight(&m.tuning) as usize) < ring_slots
    });
    let release_ns = if held {
        lat.held_release()
    } else {
        lat.release_ns
    };
    // The consumer warps that compute the pages.
    let warps = s
        .model
        .as_ref()
        .map_or(mkc_catalogue::PERSISTENT_WARPS, |m| {
            mkc_catalogue::persistent_warps(&m.tuning)
        });
    // The weight bytes one page of each operator carries (its rows of a K chunk: less than the
    // page size where rows do not fill it); the page size where the model is not embedded.
    let default_page = s
        .model
        .as_ref()
        .map_or(mkc_ir::model::Lowering::default().page_bytes, |m| {
            m.lowering.page_bytes
        }) as f64;
    let page_bytes: Vec<(mkc_ir::OpKind, f64)> = mkc_ir::work::MATVECS
        .iter()
        .map(|&kind| {
            let work = s.model.as_ref().and_then(|m| mkc_ir::work::matvec(m, kind));
            (
                kind,
                work.map_or(default_page, |w| w.page_weight_bytes() as f64),
            )
        })
        .collect();
    // Each operator's input latency after its wait (input_latency), once per kind rather
    // than at every admission.
    let input_ns: Vec<(mkc_ir::OpKind, f64)> = mkc_ir::work::MATVECS
        .iter()
        .chain(&[mkc_ir::OpKind::Attention])
        .map(|&kind| {
            (
                kind,
                input_latency(s.model.as_ref(), kind, ring_slots, device),
            )
        })
        .collect();
    // Which operators' page loops run on the tensor cores (their pages' math is
    // `page_compute_mma_ns`), once per kind.
    let tensor_cores: Vec<mkc_ir::OpKind> = mkc_ir::work::MATVECS
        .iter()
        .copied()
        .filter(|&kind| {
            s.model.as_ref().is_some_and(|m| {
                mkc_ir::work::matvec(m, kind)
                    .is_some_and(|w| mkc_catalogue::tensor_core_shape(w.k, w.page_rows()))
            })
        })
        .collect();
    let input_ns_of = |kind: mkc_ir::OpKind| {
        input_ns.iter().find(|(k, _)| *k == kind).map_or_else(
            || input_latency(s.model.as_ref(), kind, ring_slots, device),
            |&(_, v)| v,
        )
    };
    let page_bytes_of = |kind: mkc_ir::OpKind| {
        page_bytes
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(default_page, |&(_, b)| b)
    };
    // Each SM streams at most its speed times the card's fair share (`DeviceProfile::sm_speed`,
    // the probe's rates while all stream). A stand-in, not a law of the card: with it the
    // H100's held ladder is within 4% at every rung (without it the stream alone was 5% under),
    // but the slow SMs do take freed bandwidth (lease AK's LM head; lease AU's unheld stream
    // alone ran at the floor). What it stands for is the hold's price on the stream (51 µs
    // held against none unheld, lease AU), not yet modelled: four models of it did not fit
    // (docs/perf.md). The chain model has no such cap: with it, pdl +11-15%.
    let sms_n = plan.streams.len().max(1) as u32;
    let sm_speed: Vec<f64> = (0..sms_n).map(|sm| device.sm_speed(sm, sms_n)).collect();
    // Flows: (SM, load, whether a warm read).
    let mut pool: Pool<(usize, usize, bool)> = Pool::new(bw, cap.min(bw / sms_n as f64));
    // The producer's L2 warming (`tuning.persistent_warm_pages`, D): while its ring is full,
    // every page it issued has landed and its consumers are staged, it reads the next weight
    // pages of its instruction, up to D past the next, one at a time from the pool, and their
    // copies then read L2 at L2_WARM_SPEEDUP times the SM's share of HBM, not the pool.
    // (L2's capacity is not modelled: ~40 MiB of such pages, 19 per SM.)
    let warm_pages =
        s.model
            .as_ref()
            .map_or(0, |m| mkc_catalogue::persistent_warm_pages(&m.tuning)) as usize;
    let l2_rate = L2_WARM_SPEEDUP * cap.min(bw / sms_n as f64);
    let mut queue: EventQueue<Event> = EventQueue::default();
    let mut sms: Vec<Sm> = plan
        .streams
        .iter()
        .map(|st| {
            let mut loads = Vec::new();
            let mut first_load = Vec::with_capacity(st.len() + 1);
            let mut prev_attention = Vec::with_capacity(st.len());
            let mut last_attention = None;
            for (i, ins) in st.iter().enumerate() {
                first_load.push(loads.len());
                prev_attention.push(last_attention);
                if reads_history(ins.first) {
                    last_attention = Some(i);
                }
                for t in ins.tasks() {
                    // A task that computes attention has its KV history copied first, then
                    // its weight pages (if it has any: attention inside the O-projection).
                    let cost = &g.task(t).cost;
                    let history = reads_history(t).then(|| cost.kv_bytes_at(kv_len) as f64);
                    let weights = cost.weight_bytes as f64;
                    let pages = if history.is_some() && weights == 0.0 {
                        0
                    } else {
                        pages_in(weights, page_bytes_of(kind_of(t))).max(1)
                    };
                    if let Some(bytes) = history {
                        loads.push(Load {
                            ins: i,
                            task: t.index(),
                            last_of_task: pages == 0,
                            bytes,
                            kv: true,
                            landed: false,
                            landed_at: 0.0,
                            warmed: false,
                        });
                    }
                    for p in 0..pages {
                        loads.push(Load {
                            ins: i,
                            task: t.index(),
                            last_of_task: p + 1 == pages,
                            bytes: weights / pages as f64,
                            kv: false,
                            landed: false,
                            landed_at: 0.0,
                            warmed: false,
                        });
                    }
                }
            }
            first_load.push(loads.len());
            Sm {
                loads,
                first_load,
                prev_attention,
                next_load: 0,
                loading: false,
                stalled: false,
                warming: false,
                resume_at: lat.load_latency_ns,
                paced_at: 0.0,
                ring_used: 0,
                consumed: 0,
                consumer: 0,
                admitted: None,
                staged: false,
                math: PageMath::new(warps, &ablate, device),
                computing: false,
                free_at: 0.0,
            }
        })
        .collect();
    let mut remaining: Vec<u32> = g.counters.iter().map(|c| c.signals_per_step).collect();
    let mut done_at = vec![0.0f64; g.counters.len()];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); g.counters.len()];
    let mut spans = Span::unset(g.tasks.len());

    // Issues the SM's next loads, in stream order, while there is room for them. True when
    // one landed at once (no bytes to move), so that its consumer can move on.
    let try_load = |sm: usize,
                    now: f64,
                    sms: &mut Vec<Sm>,
                    pool: &mut Pool<(usize, usize, bool)>,
                    spans: &mut Vec<Span>,
                    queue: &mut EventQueue<Event>|
     -> bool {
        let st = &mut sms[sm];
        let mut landed_now = false;
        while !st.loading && st.next_load < st.loads.len() && now >= st.resume_at {
            let j = st.next_load;
            let (ins_j, bytes, kv) = (st.loads[j].ins, st.loads[j].bytes, st.loads[j].kv);
            let fits = if kv {
                // The region is free once the previous attention instruction has ended.
                st.prev_attention[ins_j].is_none_or(|p| st.consumer > p)
            } else {
                st.ring_used < ring_slots
            };
            if !fits {
                st.stalled = true;
                break;
            }
            // The producer's loop hands out a weight page no sooner than `page_loop_ns` after
            // the last: what paces a weights-ablated build's pages (a copy at an SM's share of
            // the card, 0.48 µs and more, outlasts it).
            if !kv {
                if now < st.paced_at {
                    queue.push(st.paced_at, Event::Fill(sm));
                    break;
                }
                st.paced_at = now + lat.page_loop_ns;
            }
            let task = st.loads[j].task;
            // A task's loads start with its first page's.
            if j == 0 || st.loads[j - 1].task != task {
                spans[task].load_start = now;
            }
            st.next_load += 1;
            if !kv {
                st.ring_used += 1;
            }
            // Without weights (the ablation) a page lands once its slot is free: the kernel's
            // producer arrives on the slot's barrier without a copy.
            if bytes > 0.0 && !kv && st.loads[j].warmed {
                st.loading = true;
                queue.push(now + bytes / (l2_rate * sm_speed[sm]), Event::Landed(sm, j));
            } else if bytes > 0.0 && (kv || !ablate.weights) {
                // The KV history is a flow beside the pages: the kernel's producer issues its
                // bulk copies and goes on to the next pages (measured at 1,024 positions, 4
                // parts: the model -5.9% with the history ahead of the pages, -1.1% beside
                // them; docs/perf.md, fortieth session).
                st.loading |= !kv;
                pool.start_weighted(now, bytes, sm_speed[sm], (sm, j, false));
            } else {
                st.loads[j].landed = true;
                st.loads[j].landed_at = now;
                landed_now = true;
            }
        }
        // Warming: the ring full and landed, the consumers staged.
        let j = st.next_load;
        if warm_pages > 0
            && st.stalled
            && !st.loading
            && st.staged
            && !st.warming
            && !ablate.weights
            && j < st.loads.len()
            && !st.loads[j].kv
        {
            let ins = st.loads[j].ins;
            let end = (j + warm_pages).min(st.loads.len());
            if let Some(k) =
                (j..end).find(|&k| st.loads[k].ins == ins && !st.loads[k].kv && !st.loads[k].warmed)
            {
                st.warming = true;
                pool.start_weighted(now, st.loads[k].bytes, sm_speed[sm], (sm, k, true));
            }
        }
        landed_now
    };
    // Consumes the landed pages of the staged current instruction, in order; true when all
    // are. A consumed page frees its ring room.
    let consume = |st: &mut Sm| -> bool {
        let (lo, hi) = (st.first_load[st.consumer], st.first_load[st.consumer + 1]);
        if !st.staged {
            return lo == hi;
        }
        while lo + st.consumed < hi && st.loads[lo + st.consumed].landed {
            let load = &st.loads[lo + st.consumed];
            if load.kv {
                // The task's attention, by every consumer warp, before any page's math.
                st.math.together(load.landed_at, attention_ns);
            } else {
                st.ring_used -= 1;
                // The page's products (a load is one page).
                if load.bytes > 0.0 {
                    st.math.take(load.landed_at);
                }
            }
            st.consumed += 1;
        }
        lo + st.consumed == hi
    };
    // After a consumer freed room: a stalled loader resumes a load latency later.
    let resume = |sm: usize, now: f64, sms: &mut Vec<Sm>, queue: &mut EventQueue<Event>| {
        let st = &mut sms[sm];
        if st.stalled {
            st.stalled = false;
            st.resume_at = now
                + if ablate.weights {
                    0.0
                } else {
                    lat.load_latency_ns
                };
            queue.push(st.resume_at, Event::Fill(sm));
        }
    };

    for sm in 0..sms.len() {
        queue.push(lat.load_latency_ns, Event::Fill(sm));
        queue.push(0.0, Event::Check(sm));
    }
    let mut end = 0.0f64;
    // Ends the SM's current instruction at `now`: its spans, its signals (after the release),
    // and the next instruction's admission.
    macro_rules! finish {
        ($sm:expr, $now:expr) => {{
            let (sm, now) = ($sm, $now);
            let st = &mut sms[sm];
            let ins = &plan.streams[sm][st.consumer];
            let admitted = st.admitted.expect("admitted");
            // A task of the run starts once admitted and loading, ends once its last load
            // landed; the last one ends with the instruction.
            let (lo, hi) = (st.first_load[st.consumer], st.first_load[st.consumer + 1]);
            for load in st.loads[lo..hi].iter().filter(|l| l.last_of_task) {
                let span = &mut spans[load.task];
                span.start = admitted.max(span.load_start);
                span.end = if load.task + 1 == ins.first.index() + ins.count as usize {
                    now
                } else {
                    span.start.max(load.landed_at)
                };
                span.sm = sm as u32;
                span.task = mkc_ir::TaskId(load.task as u32);
            }
            end = end.max(now);
            // The release: the signals leave once the SM's stores are acknowledged, and the
            // consumers wait for it at the end barrier before the next instruction.
            let released = now + release_ns;
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
            st.staged = false;
            st.computing = false;
            st.free_at = released;
            queue.push(released, Event::Check(sm));
            // An attention instruction's end frees the KV region.
            resume(sm, now, &mut sms, &mut queue);
            try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue);
        }};
    }
    // The current instruction's next step once its pages or its stage moved on: consume, then
    // compute (attention) or end.
    macro_rules! progress {
        ($sm:expr, $now:expr) => {{
            let (sm, now) = ($sm, $now);
            // Pages that land at once let the consumer go on at once.
            loop {
                let st = &mut sms[sm];
                let before = st.consumed;
                if st.admitted.is_some() && !st.computing && consume(st) && st.staged {
                    let products = st.math.done().max(now);
                    if products > now {
                        st.computing = true;
                        queue.push(products, Event::Computed(sm));
                    } else {
                        finish!(sm, now);
                    }
                } else if sms[sm].consumed > before {
                    resume(sm, now, &mut sms, &mut queue);
                    if try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue) {
                        continue;
                    }
                }
                break;
            }
        }};
    }
    while let Some(item) = next(&mut queue, &mut pool) {
        match item {
            Next::Flow(now, (sm, k, true)) => {
                // A warm read is in L2: the next one may start.
                sms[sm].loads[k].warmed = true;
                sms[sm].warming = false;
                if try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue) {
                    progress!(sm, now);
                }
            }
            Next::Flow(now, (sm, j, false)) | Next::Event(now, Event::Landed(sm, j)) => {
                let st = &mut sms[sm];
                st.loads[j].landed = true;
                st.loads[j].landed_at = now;
                // A page's landing lets the next load go; the history's, beside it, does not.
                st.loading &= st.loads[j].kv;
                try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue);
                progress!(sm, now);
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
                // An instruction that computes attention reads its inputs as attention does.
                let kind = if reads_history(ins.first) {
                    mkc_ir::OpKind::Attention
                } else {
                    kind_of(ins.first)
                };
                let dependent =
                    ablated_dependent_bytes(&ablate, kind, ins.tasks().map(|t| g.task(t)));
                sms[sm].admitted = Some(now);
                // As in a chain CTA: activations read after the wait land a load latency
                // later; the consumers use their pages only once they are staged.
                let activations = activation_latency(&ablate, kind, input_ns_of(kind))
                    + merge_ns(s.model.as_ref(), kind, &ablate, device);
                let duration = lat.instruction_overhead_ns + activations + dependent / cap;
                queue.push(now + duration, Event::Staged(sm));
            }
            Next::Event(now, Event::Fill(sm)) => {
                if try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue) {
                    progress!(sm, now);
                }
            }
            Next::Event(now, Event::Staged(sm)) => {
                let kind = kind_of(plan.streams[sm][sms[sm].consumer].first);
                let st = &mut sms[sm];
                st.staged = true;
                st.math.start(now, tensor_cores.contains(&kind));
                if warm_pages > 0 {
                    try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue);
                }
                progress!(sm, now);
            }
            Next::Event(now, Event::Computed(sm)) => {
                finish!(sm, now);
            }
        }
    }
    StepTimeline {
        step_ns: end + lat.launch_gap_ns,
        spans,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mkc_ir::OpKind;

    /// An operator that stages its input reads it behind the boundary hold's copies, one that
    /// reads it in its page loop behind the stream cap's, neither behind more than the ring's
    /// slots; and where the O-projection's K chunk is too long for registers it stages its
    /// input and reads behind the hold's.
    #[test]
    fn inputs_queue_behind_the_copies_in_flight_when_they_are_read() {
        let dev = mkc_ir::embedded::resolve_device("h100").unwrap();
        let lat = &dev.latencies;
        let (one, four, full) = (
            lat.load_latency_beside(1),
            lat.load_latency_beside(4),
            lat.load_latency_ns,
        );
        assert!(one < four && four < full, "the profile must differ");
        let mut held = mkc_ir::embedded::resolve_model("llama1b").unwrap();
        held.tuning.persistent_boundary_inflight = Some(1);
        held.tuning.persistent_stream_inflight = Some(4);
        let mut unheld = held.clone();
        unheld.tuning.persistent_boundary_inflight = None;
        unheld.tuning.persistent_stream_inflight = None;
        let at = |m: &mkc_ir::Model, kind, slots| input_latency(Some(m), kind, slots, &dev);
        for kind in [OpKind::QkvRope, OpKind::UpGate, OpKind::LmHead] {
            assert_eq!(at(&held, kind, 12), one, "{kind:?}");
            assert_eq!(at(&unheld, kind, 12), full, "{kind:?}");
            assert_eq!(at(&unheld, kind, 2), lat.load_latency_beside(2), "{kind:?}");
        }
        for kind in [OpKind::OProj, OpKind::Down] {
            assert_eq!(at(&held, kind, 12), four, "{kind:?}");
            assert_eq!(at(&held, kind, 3), lat.load_latency_beside(3), "{kind:?}");
            assert_eq!(at(&unheld, kind, 12), full, "{kind:?}");
        }
        let mut wide = held.clone();
        wide.geometry.heads = 48;
        wide.geometry.hidden = 3072;
        let w = mkc_ir::work::matvec(&wide, OpKind::OProj).unwrap();
        assert!(
            mkc_catalogue::blocked_k(w.k),
            "an O K chunk past the registers: {}",
            w.k
        );
        assert_eq!(at(&wide, OpKind::OProj, 12), one);
    }
}
