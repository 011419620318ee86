//! The split-KV part count a run takes where the model file leaves `lowering.attention_kv_split`
//! unset: chosen from the run's workload, as the persistent layout's slots are.

use mkc_ir::Model;

use crate::{attention_chunk, check_model, persistent_layout};

/// The most parts [`kv_parts_for`] chooses: 4 is the most measured (lease BH); the model
/// still gains at 8 (docs/perf.md, the thirty-eighth session's sweep).
pub const MAX_CHOSEN_KV_PARTS: u32 = 8;

/// Split-KV parts for `model`'s workload: the fewest, a power of two up to
/// [`MAX_CHOSEN_KV_PARTS`], that leave each part of the workload's longest history (its prompt
/// and generated tokens) within one attention chunk (`attention_chunk`, sized for that part
/// count), among the counts that the model's validation and the chain kernels accept, and the
/// persistent layout too where it takes one part; where no accepted count fits, the most
/// accepted parts. 1 where the whole history fits one chunk, or where one part fails validation
/// or the kernels' checks (those checks then report why, as without the choice).
///
/// Why one chunk (docs/perf.md, lease BH, H100): at a 1,024-token prompt, 4 one-chunk parts
/// took persistent from 1,167 to 995 µs and pdl from 1,092 to 986; 2 parts of two chunks each
/// gained less (1,059 and 1,004). At P32/D128, whose history fits one chunk, 2 parts cost
/// persistent 6-13 µs and pdl 27. Why the most parts where none fits: each part's further
/// chunks run in series, so more parts shorten the longest; parts of two chunks pass the
/// operator and reference checks (lease BI: 2 parts at P1024, persistent 1,055 against 1,167
/// with one part).
pub fn kv_parts_for(model: &Model) -> u32 {
    let longest = model.workload.longest_kv_len();
    let with = |parts: u32| {
        let mut m = model.clone();
        m.lowering.attention_kv_split = Some(parts);
        m
    };
    let one = with(1);
    if one.validate("the model").is_err() || check_model(&one).is_err() {
        return 1;
    }
    let persistent = persistent_layout(&one).is_ok();
    let accepted = |parts: u32| {
        let m = with(parts);
        (m.validate("the chosen split-KV parts").is_ok()
            && check_model(&m).is_ok()
            && (!persistent || persistent_layout(&m).is_ok()))
        .then_some(m)
    };
    // One part is accepted already: it validated above, and `persistent` is its own layout.
    let counts = std::iter::once((1, one))
        .chain(
            std::iter::successors(Some(2u32), |p| Some(p * 2))
                .take_while(|&p| p <= MAX_CHOSEN_KV_PARTS)
                .filter_map(|p| accepted(p).map(|m| (p, m))),
        )
        .collect::<Vec<_>>();
    counts
        .iter()
        .find(|(p, m)| longest.div_ceil(*p) <= attention_chunk(m))
        .or(counts.last())
        .map_or(1, |(p, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuned(prompt_len: u32, generate: u32) -> Model {
        let mut m = Model::parse(
            "models/llama1b_tuned.ron",
            include_str!("../../models/llama1b_tuned.ron"),
        )
        .unwrap();
        m.workload.prompt_len = prompt_len;
        m.workload.generate = generate;
        m
    }

    /// The bar's workload keeps one part; lease BH's 1,024-token run takes its 4; every
    /// chosen count leaves the longest history's parts within one chunk.
    #[test]
    fn parts_grow_with_the_history_and_each_fits_one_chunk() {
        assert_eq!(kv_parts_for(&tuned(32, 128)), 1);
        assert_eq!(kv_parts_for(&tuned(1024, 64)), 4);
        let mut last = 1;
        for prompt in [1u32, 100, 300, 500, 900, 1500, 1900] {
            let m = tuned(prompt, 64);
            assert!(prompt + 64 <= m.workload.max_seq_len);
            let parts = kv_parts_for(&m);
            assert!(
                parts.is_power_of_two() && parts >= last,
                "{prompt}: {parts}"
            );
            let mut chosen = m.clone();
            chosen.lowering.attention_kv_split = Some(parts);
            assert!(
                (prompt + 64).div_ceil(parts) <= attention_chunk(&chosen),
                "{prompt}: {parts}"
            );
            last = parts;
        }
    }
}

#[cfg(test)]
mod refusals {
    use super::*;

    /// A model refused with one part keeps one part, so that its checks report the same fault
    /// as without the choice; so does one whose history no accepted count serves.
    #[test]
    fn a_refused_model_keeps_one_part() {
        let mut m = Model::parse(
            "models/llama1b_tuned.ron",
            include_str!("../../models/llama1b_tuned.ron"),
        )
        .unwrap();
        m.workload.prompt_len = 1024;
        m.workload.generate = 64;
        assert_eq!(kv_parts_for(&m), 4);
        let mut invalid = m.clone();
        invalid.lowering.attention_split = 3; // divides no head group of 4
        assert!(invalid.validate("test").is_err());
        assert_eq!(kv_parts_for(&invalid), 1);
        m.workload.max_seq_len = 1 << 20;
        m.workload.prompt_len = 1 << 19;
        assert_eq!(kv_parts_for(&m), 1);
    }

    /// A history that no count up to the most fits one chunk per part takes the most parts the
    /// kernels accept: llama3b's 128-wide heads at a 1,900-token prompt (the model: persistent
    /// 3,704 µs with one part, 2,157 with 8).
    #[test]
    fn an_unfit_history_takes_the_most_parts() {
        let mut m = mkc_ir::embedded::resolve_model("llama3b").unwrap();
        m.workload.prompt_len = 1900;
        m.workload.generate = 64;
        let parts = kv_parts_for(&m);
        assert_eq!(parts, MAX_CHOSEN_KV_PARTS);
        let mut chosen = m.clone();
        chosen.lowering.attention_kv_split = Some(parts);
        assert!(1964u32.div_ceil(parts) > attention_chunk(&chosen));
    }
}
