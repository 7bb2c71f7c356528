//! The operator commands, one file each; `main` only parses and
//! dispatches. What each prints is its contract with the operator
//! (tests/operator_messages.rs). `run` and `console` are the library's own
//! (`service::run`, `console::run`).

pub mod breaker;
pub mod inspect;
pub mod maintain;
pub mod migrate;
pub mod parked;
pub mod positions;
