//! mkc's simulator: occupancy/admission rules and a discrete-event timeline of a schedule.
//!
//! Its own issue (simulator) fills this crate; until then it holds nothing, and the scheduler's
//! cost model (`mkc_scheduler::cost`) is the only timing mkc has.
