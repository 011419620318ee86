//! Reading a schedule file back, and the structural check that must pass before anything
//! indexes into it: every id in range and equal to its position, every row range inside its
//! tensor, the plan of the schedule's target. A schedule file may come from anywhere (an
//! edited file, another version, a fuzzer), so the checker and the simulator never meet an id
//! they cannot look up.

use mkc_ir::{Access, FileKind, InputError};

use crate::schedule::{Plan, Schedule, Target};

/// Most rows a tensor of a schedule may have: the most validation lets a model lower to, so
/// anything beyond is not a schedule mkc wrote.
const MAX_ROWS: u32 = mkc_ir::validate_bounds::MAX_TENSOR_ROWS as u32;

/// Most weight and KV pages (of the default page size) a schedule file without its model may
/// move per step: the simulator issues every page as a load of its own, so this bounds its
/// memory (a schedule with its model must be that model's lowering instead).
const MAX_STEP_PAGES: f64 = (1u64 << 22) as f64;

impl Schedule {
    /// Whether `path` looks like a schedule file rather than a model file: a JSON object, or
    /// RON that starts with the schedule's first field. Reads only the first bytes, and only of
    /// a regular file.
    pub fn sniff(path: &std::path::Path) -> bool {
        use std::io::Read;
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return false;
        }
        let mut head = [0u8; 64];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        let text = String::from_utf8_lossy(&head[..n]);
        let t = text.trim_start();
        t.starts_with('{') || t.starts_with("(mkc_version") || t.starts_with("Schedule(")
    }

    /// Parses a schedule file's text (JSON when it starts with `{`, else RON; `file` names it
    /// in errors) and checks its structure.
    pub fn parse(file: &str, text: &str) -> Result<Schedule, InputError> {
        let s: Schedule = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| InputError::Syntax {
                file: file.to_string(),
                kind: FileKind::Schedule,
                field: None,
                line: e.line(),
                column: e.column(),
                message: mkc_ir::error::shorten(&e.to_string()),
            })?
        } else {
            ron::from_str(text)
                .map_err(|e| InputError::from_ron(FileKind::Schedule, file, text, &e))?
        };
        s.check_structure(file)?;
        Ok(s)
    }

    /// Reads and parses a schedule file from disk, and refuses one that breaks an invariant
    /// the independent checker proves (a hand-edited file is never timed or launched).
    pub fn load(path: &std::path::Path) -> Result<Schedule, InputError> {
        let text = mkc_ir::input::read_text(path, FileKind::Schedule)?;
        let file = path.display().to_string();
        let s = Schedule::parse(&file, &text)?;
        let v = crate::check::check(&s);
        if let Some(first) = v.0.first() {
            return Err(InputError::invalid(
                &file,
                "plan",
                format!(
                    "the schedule breaks mkc's invariants ({} found; the first: {first})",
                    v.0.len()
                ),
                "use a schedule written by `mkc compile -o`, or recompile it",
            ));
        }
        Ok(s)
    }

    /// The structural check: the first id out of range, id out of place or row range outside
    /// its tensor, named by its field path.
    pub fn check_structure(&self, file: &str) -> Result<(), InputError> {
        self.device.validate(file)?;
        if let Some(m) = &self.model {
            m.validate(file)?;
            if m.tuning != self.tuning {
                return Err(InputError::invalid(
                    file,
                    "tuning",
                    "the schedule's tuning differs from its model's",
                    "use a schedule written by `mkc compile -o`",
                ));
            }
        }
        let g = &self.graph;
        let bad = |field: String, problem: String| {
            Err(InputError::invalid(
                file,
                field,
                problem,
                "use a schedule written by `mkc compile -o`",
            ))
        };
        let (n_ops, n_tensors, n_tasks) = (g.ops.len(), g.tensors.len(), g.tasks.len());
        let (n_edges, n_counters) = (g.edges.len(), g.counters.len());
        if n_tasks as u64 > mkc_ir::validate_bounds::MAX_TASKS {
            return bad(
                "graph.tasks".into(),
                format!(
                    "{n_tasks} tasks, more than the {} a model lowers to",
                    mkc_ir::validate_bounds::MAX_TASKS
                ),
            );
        }
        let access = |field: String, a: &Access| {
            let Some(t) = g.tensors.get(a.tensor.index()) else {
                return bad(field, format!("{} does not exist", a.tensor));
            };
            if a.rows.start >= a.rows.end || a.rows.end > t.rows {
                return bad(
                    field,
                    format!(
                        "rows {}..{} are not a non-empty range of {} ({} rows)",
                        a.rows.start, a.rows.end, t.name, t.rows
                    ),
                );
            }
            Ok(())
        };
        for (i, o) in g.ops.iter().enumerate() {
            let end = o.first_task.0 as u64 + o.tasks as u64;
            if o.id.index() != i || end > n_tasks as u64 || o.k_split == 0 {
                return bad(
                    format!("graph.ops[{i}]"),
                    format!(
                        "id {}, tasks {}..{end}, k_split {}",
                        o.id, o.first_task, o.k_split
                    ),
                );
            }
        }
        for (i, t) in g.tensors.iter().enumerate() {
            if t.id.index() != i || t.rows == 0 || t.rows > MAX_ROWS {
                return bad(
                    format!("graph.tensors[{i}]"),
                    format!("id {} with {} rows", t.id, t.rows),
                );
            }
            if t.producer.is_some_and(|p| p.index() >= n_ops) {
                return bad(
                    format!("graph.tensors[{i}].producer"),
                    "no such operator".into(),
                );
            }
        }
        for (i, t) in g.tasks.iter().enumerate() {
            if t.id.index() != i || t.op.index() >= n_ops {
                return bad(
                    format!("graph.tasks[{i}]"),
                    format!("id {} of {}", t.id, t.op),
                );
            }
            for (j, a) in t.reads.iter().enumerate() {
                access(format!("graph.tasks[{i}].reads[{j}]"), a)?;
            }
            for (j, a) in t.writes.iter().enumerate() {
                access(format!("graph.tasks[{i}].writes[{j}]"), a)?;
            }
            if let Some(c) = t
                .waits
                .iter()
                .chain(&t.signals)
                .find(|c| c.index() >= n_counters)
            {
                return bad(format!("graph.tasks[{i}]"), format!("{c} does not exist"));
            }
        }
        for (i, e) in g.edges.iter().enumerate() {
            let ops_ok = e.producer.index() < n_ops && e.consumer.index() < n_ops;
            let counters_ok = e.counters.iter().all(|c| c.index() < n_counters);
            if e.id.index() != i || !ops_ok || e.tensor.index() >= n_tensors || !counters_ok {
                return bad(
                    format!("graph.edges[{i}]"),
                    "an id is out of range or out of place".into(),
                );
            }
        }
        for (i, c) in g.counters.iter().enumerate() {
            if c.id.index() != i || c.edge.index() >= n_edges {
                return bad(
                    format!("graph.counters[{i}]"),
                    format!("id {} of edge {}", c.id, c.edge),
                );
            }
            access(format!("graph.counters[{i}].access"), &c.access)?;
        }
        // The task graph is a function of the model: a file whose graph is sound but not its
        // model's lowering (an edited cost, task or tensor) is refused before anything times
        // it. Without the model nothing derives the costs, so what a simulation of them loads
        // is bounded instead (in f64: a cost near u64::MAX must not wrap).
        match &self.model {
            Some(m) => {
                if *g != mkc_ir::lower::lower(m) {
                    return bad(
                        "graph".into(),
                        "the task graph is not the lowering of the schedule's model (a task, \
                         tensor, edge, counter or cost differs)"
                            .into(),
                    );
                }
            }
            None => {
                let page = mkc_ir::model::Lowering::default().page_bytes as f64;
                let pages: f64 = g
                    .tasks
                    .iter()
                    .map(|t| {
                        let c = &t.cost;
                        let kv =
                            c.kv_bytes_per_token as f64 * c.kv_positions(g.typical_kv_len) as f64;
                        ((c.weight_bytes as f64 + kv) / page).ceil()
                    })
                    .sum();
                if pages > MAX_STEP_PAGES {
                    return bad(
                        "graph.tasks".into(),
                        format!(
                            "the tasks' costs move {pages:.3e} pages of {page} bytes per step, \
                             more than the {MAX_STEP_PAGES:.0} a schedule without its model may"
                        ),
                    );
                }
            }
        }
        match (&self.plan, self.target) {
            (Plan::Persistent(p), Target::Persistent) => {
                for (sm, stream) in p.streams.iter().enumerate() {
                    for (j, ins) in stream.iter().enumerate() {
                        let counters_ok = ins
                            .waits
                            .iter()
                            .map(|w| w.counter)
                            .chain(ins.signals.iter().map(|s| s.counter))
                            .all(|c| c.index() < n_counters);
                        let run_ok = ins.count > 0
                            && ins.first.index() as u64 + ins.count as u64 <= n_tasks as u64;
                        if !run_ok || !counters_ok {
                            return bad(
                                format!("plan.streams[{sm}][{j}]"),
                                "a task run or counter id is out of range (first + count must \
                                 lie within the graph's tasks, count at least 1)"
                                    .into(),
                            );
                        }
                    }
                }
            }
            (Plan::Chain(c), Target::Pdl | Target::Graph) => {
                for (i, k) in c.kernels.iter().enumerate() {
                    // Every run lies within its operator's tasks (what a timeline indexes).
                    let ops_ok = k.op.index() < n_ops
                        && k.runs.len() == k.ctas as usize
                        && k.runs.iter().all(|&[first, count]| {
                            first as u64 + count as u64 <= self.graph.ops[k.op.index()].tasks as u64
                        });
                    let reads_ok = k
                        .wait
                        .as_ref()
                        .is_none_or(|w| w.dependent_reads.iter().all(|t| t.index() < n_tensors));
                    if !ops_ok || !reads_ok {
                        return bad(
                            format!("plan.kernels[{i}]"),
                            "an operator or tensor id is out of range, or the task runs are not one per CTA"
                                .into(),
                        );
                    }
                }
            }
            _ => {
                return bad(
                    "plan".into(),
                    format!("the plan is not one of target {}", self.target.name()),
                )
            }
        }
        Ok(())
    }
}
