//! `--timeline` of `mkc run` and `mkc bench`: one traced decode step per target, written as a
//! Perfetto trace (the format of `mkc simulate --trace`) and summed per operator kind.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use mkc_backend::timeline::{breakdown, chrome_trace, spans, task_ends, Breakdown};
use mkc_ir::edges::{layer_edges, LayerEdge};
use mkc_scheduler::{Schedule, Target};

use super::CommandError;
use mkc_backend::gpu::Runner;

/// The timeline files of a run, created before any GPU work so that a bad path fails first.
pub struct TimelineFiles {
    files: Vec<(Target, PathBuf, File)>,
}

impl TimelineFiles {
    /// One file per target: `path` itself for one target, else `path` with `.TARGET` before
    /// its extension (`t.json` -> `t.pdl.json`).
    pub fn create(path: &Path, targets: &[Target]) -> Result<TimelineFiles, CommandError> {
        let mut files = Vec::new();
        for &t in targets {
            let p = if targets.len() == 1 {
                path.to_path_buf()
            } else {
                per_target(path, t)
            };
            let f = mkc_ir::input::create_output(&p).map_err(|e| {
                CommandError::Input(format!(
                    "--timeline {}: cannot create it ({e}). Fix: give a path in a writable \
                     directory.",
                    p.display()
                ))
            })?;
            files.push((t, p, f));
        }
        Ok(TimelineFiles { files })
    }

    /// Traces `schedule` (of `target`) at decode position `pos` (the model state must be
    /// valid there), writes its file and returns where the step's time went: per kind, and
    /// at each kind of operator boundary.
    pub fn write(
        &mut self,
        runner: &mut Runner,
        model: &str,
        pos: u32,
        target: Target,
        schedule: &Schedule,
    ) -> Result<(PathBuf, Breakdown, Vec<LayerEdge>), CommandError> {
        let Some((_, path, file)) = self.files.iter_mut().find(|(t, ..)| *t == target) else {
            return Err(CommandError::Internal(format!(
                "--timeline: no file was created for target {}",
                target.name()
            )));
        };
        let ghz = runner.clock_khz()? as f64 / 1e6;
        let work = runner.trace_work(schedule, pos)?;
        let sp = spans(&work, ghz);
        let what = format!("{model} measured ({}), position {pos}", target.name());
        let json = chrome_trace(&sp, &what).to_string();
        file.write_all(json.as_bytes()).map_err(|e| {
            CommandError::Internal(format!("--timeline {}: write failed: {e}", path.display()))
        })?;
        let edges = layer_edges(&schedule.graph, &task_ends(&sp, &schedule.graph));
        Ok((path.clone(), breakdown(&sp), edges))
    }
}

/// `path` with `.TARGET` before its extension.
fn per_target(path: &Path, t: Target) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}.{}.{}", t.name(), e.to_string_lossy()),
        None => format!("{stem}.{}", t.name()),
    };
    path.with_file_name(name)
}

/// One line of a step's operator boundaries (`mkc simulate --trace`, `--timeline`): the median
/// per kind of edge over the layers, with how many there were, and the simulator's figure for
/// the same kind of edge in brackets where `predicted` has one.
pub fn edges_line(edges: &[LayerEdge], predicted: &[LayerEdge]) -> String {
    let cells: Vec<String> = edges
        .iter()
        .map(|e| {
            let p = predicted
                .iter()
                .find(|p| (p.from, p.to) == (e.from, e.to))
                .map_or_else(String::new, |p| format!(" [{:.2}]", p.median_us));
            format!(
                "{}->{} {:.2}{p} ({})",
                e.from.name(),
                e.to.name(),
                e.median_us,
                e.count
            )
        })
        .collect();
    let what = if predicted.is_empty() {
        "median us"
    } else {
        "median us [predicted]"
    };
    format!("operator boundaries, {what} (count): {}", cells.join(", "))
}

/// Prints a traced step's breakdown: µs per SM in each phase, per operator kind, and its
/// operator boundaries.
pub fn print_breakdown(
    target: Target,
    path: &Path,
    b: &Breakdown,
    edges: &[LayerEdge],
    predicted: &[LayerEdge],
) {
    outln!(
        "  timeline ({}): {} written; traced step {:.1} us over {} SMs (tracing slows the step); \
         us per SM:",
        target.name(),
        path.display(),
        b.step_us,
        b.sms
    );
    outln!("    kind        units   issue   await   stage  compute  finish  release   total");
    for r in &b.rows {
        outln!(
            "    {:<10} {:>6} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>7.1} {:>8.1} {:>7.1}",
            r.kind,
            r.units,
            r.issue_us,
            r.await_us,
            r.stage_us,
            r.compute_us,
            r.finish_us,
            r.release_us,
            r.total_us
        );
    }
    if !edges.is_empty() {
        outln!("    {}", edges_line(edges, predicted));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A traced boundary shows the simulator's figure for the same kind of edge in brackets, and
    /// none where the prediction has no such edge; without a prediction the header says so.
    #[test]
    fn boundaries_show_the_prediction_beside_the_trace() {
        use mkc_ir::OpKind::{Attention, Down, QkvRope};
        let edge = |from, to, median_us| LayerEdge {
            from,
            to,
            median_us,
            count: 15,
        };
        let traced = [edge(Down, QkvRope, 7.17), edge(QkvRope, Attention, 4.61)];
        let line = edges_line(&traced, &[edge(Down, QkvRope, 5.73)]);
        assert!(line.contains("median us [predicted]"), "{line}");
        assert!(line.contains("down->qkv_rope 7.17 [5.73] (15)"), "{line}");
        assert!(line.contains("qkv_rope->attention 4.61 (15)"), "{line}");
        let alone = edges_line(&traced, &[]);
        assert!(
            alone.contains("median us (count)") && !alone.contains('['),
            "{alone}"
        );
    }

    #[test]
    fn several_targets_get_one_file_each() {
        assert_eq!(
            per_target(Path::new("out/t.json"), Target::Pdl),
            PathBuf::from("out/t.pdl.json")
        );
        assert_eq!(
            per_target(Path::new("t"), Target::Persistent),
            PathBuf::from("t.persistent")
        );
    }
}
