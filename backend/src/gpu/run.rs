//! Running the workload (prefill and decode, one graph launch per step, under a watchdog) and
//! timing graphs and bandwidth.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys};
use mkc_scheduler::Target;

use super::device::{EventPair, STALLED};
use super::launch::{arg, op_fn, GridLaunch, StepGraph};
use super::{median, Runner};
use crate::error::{check, BackendError};
use crate::reference::LayerValues;

/// What one run of the workload produced.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Generated tokens (the first comes from the last prefill step).
    pub tokens: Vec<u32>,
    /// Every token the model saw: prompt then generated.
    pub sequence: Vec<u32>,
    /// Time of each decode step, µs.
    pub step_us: Vec<f64>,
    /// Logits of the requested positions: (position, logits).
    pub logits: Vec<(u32, Vec<f32>)>,
    /// Every layer's values at the positions `RunOptions::capture_layers` asks for.
    pub layers: Vec<(u32, Vec<LayerValues>)>,
}

/// Options of a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Positions whose logits are copied back (after poisoning the buffer).
    pub capture_logits: Vec<u32>,
    /// Positions after whose step every layer's values are copied back too
    /// (`Runner::layer_values`), to say where a run that fails its check went wrong.
    pub capture_layers: Vec<u32>,
    /// Longest a step may take before the watchdog stops the run.
    pub watchdog: Duration,
}

impl Runner {
    /// Runs the prompt then `generate` tokens with `graph`, timing each decode step.
    pub fn run(
        &self,
        graph: &StepGraph,
        prompt: &[u32],
        generate: u32,
        opts: &RunOptions,
    ) -> Result<RunOutput, BackendError> {
        let max = self.model.workload.max_seq_len as usize;
        let p_len = prompt.len();
        if p_len == 0 || p_len + generate as usize > max {
            return Err(BackendError::Unsupported(format!(
                "prompt ({p_len}) + tokens ({generate}) must be 1..={max} (workload.max_seq_len)"
            )));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t >= self.model.geometry.vocab) {
            return Err(BackendError::Unsupported(format!(
                "prompt token {bad} is outside the vocabulary ({})",
                self.model.geometry.vocab
            )));
        }
        // Forced tokens: the largest possible key, so the LM head's atomicMax keeps them.
        let mut tokens = vec![0u64; max + 1];
        for (i, &t) in prompt.iter().enumerate() {
            tokens[i] = (0xFFFF_FFFFu64 << 32) | (0xFFFF_FFFF - t) as u64;
        }
        super::device::upload(self.globals.tokens, &tokens, "tokens")?;
        let ev = EventPair::new("step")?;
        let mut step_us = Vec::new();
        let mut logits = Vec::new();
        let mut layers = Vec::new();
        let vocab = self.model.geometry.vocab as usize;
        let last = p_len as u32 + generate - 1;
        for pos in 0..last {
            let capture = opts.capture_logits.contains(&pos);
            self.set_position(pos)?;
            // SAFETY: `logits` is a live device buffer of the size written; the events and graph
            // belong to this runner and its stream.
            unsafe {
                if capture {
                    check(
                        result::memset_d8_async(self.globals.logits, 0xFF, vocab * 4, self.stream),
                        "cuMemsetD8Async",
                        "logits poison",
                    )?;
                }
                check(
                    result::event::record(ev.start, self.stream),
                    "cuEventRecord",
                    "step",
                )?;
                check(
                    result::graph::launch(graph.exec, self.stream),
                    "cuGraphLaunch",
                    graph.target.name(),
                )?;
                check(
                    result::event::record(ev.end, self.stream),
                    "cuEventRecord",
                    "step",
                )?;
            }
            self.watch(ev.end, graph.target, pos, opts.watchdog)?;
            self.check_stall(graph, pos)?;
            if pos as usize >= p_len {
                step_us.push(ev.elapsed_ms("step")? * 1e3);
            }
            if capture {
                let mut host = vec![0f32; vocab];
                // SAFETY: the logits buffer holds vocab floats; the stream is idle.
                check(
                    unsafe { result::memcpy_dtoh_sync(&mut host, self.globals.logits) },
                    "cuMemcpyDtoH",
                    "logits",
                )?;
                logits.push((pos, host));
            }
            if opts.capture_layers.contains(&pos) {
                layers.push((pos, self.layer_values()?));
            }
        }
        // SAFETY: the tokens buffer holds max + 1 slots.
        check(
            unsafe { result::memcpy_dtoh_sync(&mut tokens, self.globals.tokens) },
            "cuMemcpyDtoH",
            "tokens",
        )?;
        let sequence: Vec<u32> = tokens[..=last as usize]
            .iter()
            .map(|&t| 0xFFFF_FFFF - (t & 0xFFFF_FFFF) as u32)
            .collect();
        Ok(RunOutput {
            tokens: sequence[p_len..].to_vec(),
            sequence,
            step_us,
            logits,
            layers,
        })
    }

    /// Polls `event` until it completes or the watchdog fires.
    fn watch(
        &self,
        event: sys::CUevent,
        target: Target,
        pos: u32,
        limit: Duration,
    ) -> Result<(), BackendError> {
        let started = Instant::now();
        loop {
            // SAFETY: `event` is a live event.
            match unsafe { sys::cuEventQuery(event) } {
                sys::CUresult::CUDA_SUCCESS => return Ok(()),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                e => {
                    return Err(BackendError::Cuda {
                        call: "cuEventQuery",
                        context: format!("{} step at position {pos}", target.name()),
                        error: format!("{e:?}"),
                    })
                }
            }
            if started.elapsed() > limit {
                STALLED.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(BackendError::Watchdog {
                    target: target.name().to_string(),
                    pos,
                    seconds: limit.as_secs_f64(),
                });
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Times a graph of the plan's grids `launches` as ordinary launches (no PDL), replayed
    /// `reps` times after one warm-up: median µs per replay. Used to time each operator alone.
    pub fn time_grids(
        &self,
        launches: &[crate::launch_plan::LaunchShape],
        reps: usize,
    ) -> Result<f64, BackendError> {
        let mut grids = Vec::with_capacity(launches.len());
        for &shape in launches {
            grids.push(GridLaunch {
                f: op_fn(&self.funcs, shape.kind)?,
                shape: crate::launch_plan::LaunchShape {
                    pdl_attribute: false,
                    waits: false,
                    early: false,
                    ..shape
                },
                trace: 0,
            });
        }
        let step = self.capture_grids(Target::Graph, "per-kernel timing", grids.into_iter())?;
        self.median_ms(reps, "per-kernel", || {
            // SAFETY: the graph is live and instantiated for this stream.
            check(
                unsafe { result::graph::launch(step.exec, self.stream) },
                "cuGraphLaunch",
                "per-kernel",
            )
        })
        .map(|ms| ms * 1e3)
    }

    /// Runs `enqueue` between two events `reps + 1` times (the first is a warm-up) and returns
    /// the median milliseconds; the watchdog guards each repetition.
    fn median_ms(
        &self,
        reps: usize,
        what: &str,
        mut enqueue: impl FnMut() -> Result<(), BackendError>,
    ) -> Result<f64, BackendError> {
        let ev = EventPair::new(what)?;
        let mut times = Vec::with_capacity(reps + 1);
        for _ in 0..reps + 1 {
            // SAFETY: live events on this runner's stream.
            check(
                unsafe { result::event::record(ev.start, self.stream) },
                "cuEventRecord",
                what,
            )?;
            enqueue()?;
            // SAFETY: as above.
            check(
                unsafe { result::event::record(ev.end, self.stream) },
                "cuEventRecord",
                what,
            )?;
            self.watch(ev.end, Target::Graph, 0, Duration::from_secs(10))?;
            times.push(ev.elapsed_ms(what)?);
        }
        times.remove(0);
        Ok(median(times))
    }

    /// Measures streaming read bandwidth in this process: `bytes` read, median of `reps`, GB/s.
    pub fn read_bandwidth(&mut self, bytes: usize, reps: usize) -> Result<f64, BackendError> {
        let buf = self.alloc(bytes, "read-bandwidth probe")?;
        let sink = self.alloc(4, "sink")?;
        let ms = self.median_ms(reps, "read-bandwidth probe", || {
            let mut p = buf;
            let mut n = (bytes / 16) as u64;
            let mut s = sink;
            let mut args: Vec<*mut c_void> = vec![arg(&mut p), arg(&mut n), arg(&mut s)];
            // SAFETY: the arguments match k_read_bw; the buffers are live.
            check(
                unsafe {
                    result::launch_kernel(
                        self.read_bw,
                        (132 * 16, 1, 1),
                        (256, 1, 1),
                        0,
                        self.stream,
                        &mut args,
                    )
                },
                "cuLaunchKernel",
                "k_read_bw",
            )
        })?;
        Ok(bytes as f64 / (ms * 1e-3) / 1e9)
    }
}
