//! Runs: one tool call executing one capsule. Pure state machines the Session DO drives:
//! the tool arguments turned into a capsule spec (`args`), the FIFO queue of one relay
//! session (`queue`), and the executor's NDJSON backchannel applied to a run (`backchannel`).

pub mod args;
pub mod backchannel;
pub mod queue;
