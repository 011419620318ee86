//! The one median mkc reports: GPU timings, probe figures and a step's operator boundaries.

/// Median of a non-empty sample (the upper middle of an even count): every GPU figure mkc
/// reports is the median of repeated runs, and the simulator's boundaries are read the same way.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
