//! The discrete-event core: a time-ordered event queue and a fluid bandwidth pool.
//!
//! Streaming reads are *flows*: every active flow is served at the same rate,
//! `min(per_flow_cap, bandwidth / active_flows)`, so bandwidth is shared among the SMs that are
//! streaming. Because all active flows progress at one rate, the pool keeps a single cumulative
//! "service" counter and each flow finishes when the counter reaches its target: O(log n) per
//! event.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A time (ns) with a total order, for heaps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Time(pub f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Events in time order; ties broken by insertion order, so runs are deterministic.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Time, u64)>>,
    events: Vec<Option<E>>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            events: Vec::new(),
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at time `at`.
    pub fn push(&mut self, at: f64, event: E) {
        let id = self.events.len() as u64;
        self.events.push(Some(event));
        self.heap.push(Reverse((Time(at), id)));
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|Reverse((t, _))| t.0)
    }

    /// Removes and returns the next event.
    pub fn pop(&mut self) -> Option<(f64, E)> {
        let Reverse((t, id)) = self.heap.pop()?;
        let e = self.events[id as usize]
            .take()
            .expect("each event popped once");
        Some((t.0, e))
    }
}

/// Bandwidth shared by the active flows.
pub struct Pool<F> {
    /// Total bandwidth, bytes per ns.
    bandwidth: f64,
    /// Most one flow can draw, bytes per ns.
    per_flow_cap: f64,
    /// Service each active flow has received since the start, in bytes.
    service: f64,
    /// Time `service` was last brought up to date.
    updated_at: f64,
    /// Active flows by the service at which they finish.
    finishing: BinaryHeap<Reverse<(Time, u64)>>,
    tags: Vec<Option<(F, f64)>>,
    active: usize,
    /// Sum of the active flows' weights.
    active_weight: f64,
    /// Bytes served so far (for achieved-bandwidth accounting).
    pub bytes_served: f64,
}

impl<F> Pool<F> {
    /// A pool of `bandwidth` bytes/ns where one flow draws at most `per_flow_cap`.
    pub fn new(bandwidth: f64, per_flow_cap: f64) -> Self {
        Pool {
            bandwidth,
            per_flow_cap,
            service: 0.0,
            updated_at: 0.0,
            finishing: BinaryHeap::new(),
            tags: Vec::new(),
            active: 0,
            active_weight: 0.0,
            bytes_served: 0.0,
        }
    }

    /// Service per unit of weight, bytes per ns.
    fn rate(&self) -> f64 {
        if self.active == 0 {
            0.0
        } else {
            self.per_flow_cap.min(self.bandwidth / self.active_weight)
        }
    }

    fn advance(&mut self, now: f64) {
        let dt = (now - self.updated_at).max(0.0);
        let r = self.rate();
        self.service += r * dt;
        self.bytes_served += r * dt * self.active_weight;
        self.updated_at = now;
    }

    /// Starts a flow of `bytes` at `now`, tagged `tag`.
    pub fn start(&mut self, now: f64, bytes: f64, tag: F) {
        self.start_weighted(now, bytes, 1.0, tag);
    }

    /// Starts a flow that draws `weight` times an average flow's share.
    pub fn start_weighted(&mut self, now: f64, bytes: f64, weight: f64, tag: F) {
        self.advance(now);
        let id = self.tags.len() as u64;
        self.tags.push(Some((tag, weight)));
        self.finishing
            .push(Reverse((Time(self.service + bytes.max(0.0) / weight), id)));
        self.active += 1;
        self.active_weight += weight;
    }

    /// When the next flow finishes, if any is active.
    pub fn next_finish(&self) -> Option<f64> {
        let Reverse((target, _)) = self.finishing.peek()?;
        let r = self.rate();
        Some(self.updated_at + ((target.0 - self.service).max(0.0)) / r)
    }

    /// Completes the next flow at `now` (which must be [`Pool::next_finish`]).
    pub fn finish_next(&mut self, now: f64) -> F {
        self.advance(now);
        let Reverse((_, id)) = self.finishing.pop().expect("an active flow");
        let (tag, weight) = self.tags[id as usize]
            .take()
            .expect("each flow finishes once");
        self.active -= 1;
        self.active_weight = if self.active == 0 {
            0.0
        } else {
            self.active_weight - weight
        };
        tag
    }

    /// Flows currently streaming.
    pub fn active(&self) -> usize {
        self.active
    }
}

/// What the simulation loop should handle next.
pub enum Next<E, F> {
    /// A timed event.
    Event(f64, E),
    /// A flow completion.
    Flow(f64, F),
}

/// Pops whichever comes first: the next event or the next flow completion.
pub fn next<E, F>(queue: &mut EventQueue<E>, pool: &mut Pool<F>) -> Option<Next<E, F>> {
    match (queue.peek_time(), pool.next_finish()) {
        (None, None) => None,
        (Some(te), Some(tf)) if tf < te => Some(Next::Flow(tf, pool.finish_next(tf))),
        (None, Some(tf)) => Some(Next::Flow(tf, pool.finish_next(tf))),
        _ => {
            let (t, e) = queue.pop().expect("an event");
            Some(Next::Event(t, e))
        }
    }
}
