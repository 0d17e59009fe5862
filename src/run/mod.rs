//! Runs: one tool call executing one capsule. Pure state machines the Session DO drives:
//! the tool arguments turned into a capsule spec (`args`), the FIFO queue of one relay
//! session (`queue`), the executor's NDJSON backchannel applied to a run (`backchannel`), and the
//! lease that tells a silent tab from a busy one (`lease`).

pub mod args;
pub mod backchannel;
pub mod lease;
pub mod queue;
