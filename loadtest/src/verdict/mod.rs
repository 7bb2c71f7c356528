//! Pure judgement of a run, no I/O: reconciliation of what was sent against
//! what the database shows, and end-to-end latency with its spike window.
//! Everything here takes plain data and is unit-tested.

pub mod latency;
pub mod reconcile;
