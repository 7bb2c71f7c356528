//! The Kafka side, as named parts:
//!
//! - [`settings`]: where the cluster is, every client's configuration, the
//!   scrubbing of secrets out of client errors.
//! - [`offsets`]: the offset-commit path, all of it: the offsets the
//!   database holds per owned partition, and the one way each reaches
//!   Kafka (`send` after a round, `commit_now` on a revoke and at close).
//! - [`rebalance`]: the consumer's context, which librdkafka calls from
//!   inside `recv` (assign, revoke, a commit's answer, statistics).
//! - [`start`]: where assigned partitions start: the database's positions.
//! - [`records`]: a polled message as the service's record.
//! - [`cluster`]: one-off questions to the cluster (topics, protocols,
//!   retention, a partition's offsets, one record).
//! - [`access`]: whether the cluster lets the service in as configured: a
//!   refused login, an untrusted certificate or the wrong security
//!   protocol, each one line naming the setting to fix.
//! - [`dlq`]: copies of parked records to the DLQ topic.
//!
//! Invariant: an offset reaches Kafka only after the database transaction of
//! the batch containing the record before it committed (see [`offsets`]).
//!
//! Imports run one way: the parts here use `store`, `metrics`, `observe`,
//! `batch`, `event` and `parked`, and none of those uses `kafka`.

pub mod access;
pub mod cluster;
mod dlq;
pub(crate) mod offsets;
mod rebalance;
mod records;
mod settings;
mod start;

pub(crate) use dlq::Dlq;
pub(crate) use offsets::CommittedOffsets;
pub(crate) use rebalance::InboxContext;
pub use records::to_record;
pub use settings::{GroupProtocol, KafkaSettings};
pub(crate) use start::{checked_start, PositionSource};
