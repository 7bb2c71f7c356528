//! Pure judgement of a run, no I/O: reconciliation of what was sent against
//! what the database shows, end-to-end latency with its spike window, and
//! the quantiles of the consumer's batch-duration histogram. Everything here
//! takes plain data, imports nothing else of the crate, and is unit-tested.

pub mod histogram;
pub mod latency;
pub mod reconcile;
