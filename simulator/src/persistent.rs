//! Timeline of the persistent target: per-SM instruction streams, counter waits with signal
//! latency, and cross-instruction weight prefetch limited by shared-memory pages.
//!
//! Each SM has a loader and a consumer. The loader streams instructions' independent bytes in
//! stream order, never waiting on counters, as long as the weights buffered but not yet consumed
//! fit in the kernel's dynamic shared memory. The consumer takes instructions in order: it
//! waits until every counter it needs is complete and visible, and until the loader has its
//! weights, then runs the dependent phase (activation reads, writes, instruction overhead) and
//! signals.

use mkc_ir::device::DeviceProfile;
use mkc_scheduler::Schedule;

use crate::engine::{next, EventQueue, Next, Pool};
use crate::timeline::{
    bandwidths, dependent_bytes, independent_bytes, SimOptions, Span, StepTimeline,
};

enum Event {
    /// Try to start the SM's next instruction.
    Check(usize),
    /// The SM's current instruction ends.
    Done(usize),
}

struct Sm {
    next_load: usize,
    loading: bool,
    loaded: Vec<bool>,
    buffered: f64,
    consumer: usize,
    busy: bool,
}

/// Simulates one step at KV length `kv_len`. The chain targets' knobs (trigger,
/// co-residency, phase release) do not apply to a persistent kernel; `_options` keeps one
/// signature for every target.
pub fn simulate(
    s: &Schedule,
    device: &DeviceProfile,
    _options: &SimOptions,
    kv_len: u32,
) -> StepTimeline {
    let plan = s.persistent().expect("a persistent schedule");
    let g = &s.graph;
    let lat = &device.latencies;
    let (bw, cap) = bandwidths(device);
    let buffer = plan.resources.dynamic_smem_bytes.max(1) as f64;
    let mut pool: Pool<(usize, usize)> = Pool::new(bw, cap);
    let mut queue: EventQueue<Event> = EventQueue::default();
    let mut sms: Vec<Sm> = plan
        .streams
        .iter()
        .map(|st| Sm {
            next_load: 0,
            loading: false,
            loaded: vec![false; st.len()],
            buffered: 0.0,
            consumer: 0,
            busy: false,
        })
        .collect();
    let mut remaining: Vec<u32> = g.counters.iter().map(|c| c.signals_per_step).collect();
    let mut done_at = vec![0.0f64; g.counters.len()];
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); g.counters.len()];
    let mut spans = Span::unset(g.tasks.len());
    let ind = |sm: usize, i: usize| independent_bytes(g.task(plan.streams[sm][i].task), kv_len);

    // Starts as many loads as the buffer allows on `sm`.
    let try_load = |sm: usize,
                    now: f64,
                    sms: &mut Vec<Sm>,
                    pool: &mut Pool<(usize, usize)>,
                    spans: &mut Vec<Span>,
                    queue: &mut EventQueue<Event>| {
        let st = &mut sms[sm];
        while !st.loading && st.next_load < plan.streams[sm].len() {
            let i = st.next_load;
            let bytes = ind(sm, i);
            if i > st.consumer && st.buffered + bytes > buffer {
                break;
            }
            let task = plan.streams[sm][i].task;
            spans[task.index()].load_start = now;
            st.buffered += bytes;
            st.next_load += 1;
            if bytes > 0.0 {
                st.loading = true;
                pool.start(now, bytes, (sm, i));
            } else {
                st.loaded[i] = true;
                queue.push(now, Event::Check(sm));
            }
        }
    };

    for sm in 0..sms.len() {
        try_load(sm, 0.0, &mut sms, &mut pool, &mut spans, &mut queue);
        queue.push(0.0, Event::Check(sm));
    }
    let mut end = 0.0f64;
    while let Some(item) = next(&mut queue, &mut pool) {
        match item {
            Next::Flow(now, (sm, i)) => {
                sms[sm].loaded[i] = true;
                sms[sm].loading = false;
                try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue);
                queue.push(now, Event::Check(sm));
            }
            Next::Event(now, Event::Check(sm)) => {
                let st = &sms[sm];
                if st.busy || st.consumer >= plan.streams[sm].len() {
                    continue;
                }
                let ins = &plan.streams[sm][st.consumer];
                let mut ready = now;
                let mut blocked = false;
                for w in &ins.waits {
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
                if !st.loaded[st.consumer] {
                    continue;
                }
                let task = g.task(ins.task);
                let duration = lat.instruction_overhead_ns + dependent_bytes(task) / cap;
                spans[ins.task.index()].start = now;
                spans[ins.task.index()].sm = sm as u32;
                spans[ins.task.index()].task = ins.task;
                sms[sm].busy = true;
                queue.push(now + duration, Event::Done(sm));
            }
            Next::Event(now, Event::Done(sm)) => {
                let i = sms[sm].consumer;
                let ins = &plan.streams[sm][i];
                spans[ins.task.index()].end = now;
                end = end.max(now);
                for c in &ins.signals {
                    let c = c.index();
                    remaining[c] -= 1;
                    done_at[c] = done_at[c].max(now);
                    if remaining[c] == 0 {
                        for w in std::mem::take(&mut waiting[c]) {
                            queue.push(now, Event::Check(w));
                        }
                    }
                }
                let freed = ind(sm, i);
                let st = &mut sms[sm];
                st.buffered -= freed;
                st.consumer += 1;
                st.busy = false;
                try_load(sm, now, &mut sms, &mut pool, &mut spans, &mut queue);
                queue.push(now, Event::Check(sm));
            }
        }
    }
    StepTimeline {
        step_ns: end + lat.launch_gap_ns,
        spans,
    }
}
