//! Runs: one tool call executing one capsule, or one file tool call (`file_op`) executed by
//! the tab on the relay session's workspace. `machine` is the run machine, the pure state machine the Session
//! DO drives: every decision about a relay session's runs. Its parts: the tool arguments turned
//! into a capsule spec (`args`), the FIFO queue (`queue`), the executor's NDJSON backchannel
//! applied to a run's log (`backchannel`), the lease that tells a gone tab from a busy one
//! (`lease`), which executor takes a run and the edge budget (`executor`), and what a tab says of its runtimes while it warms up (`readiness`).

pub mod args;
pub mod backchannel;
pub mod contexts;
pub mod executor;
pub mod file_op;
pub mod lease;
pub mod machine;
pub mod queue;
pub mod readiness;
