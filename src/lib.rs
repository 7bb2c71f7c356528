//! inventory-inbox: reserves stock in PostgreSQL exactly once per
//! `OrderPlaced` event consumed from Kafka, although Kafka delivers at least
//! once. The consumer side of the transactional inbox pattern.
//!
//! # Layout
//!
//! A record flows one way:
//!
//! ```text
//! kafka (poll, rebalance, offsets) -> event (decode + validate, pure)
//!   -> batch (classify, dedup within the batch, offsets per partition)
//!   -> store (the one transaction; SQL in sql/*.sql) -> kafka (commit)
//! ```
//!
//! - [`config`]: every flag and environment variable, validated at start-up.
//! - [`event`]: the `OrderPlaced` schema, decoding and validation (pure),
//!   in parts: `decode`, `cloudevents`, `schema`, `fingerprint`, `reasons`.
//! - [`window`]: the dedup window, the days with a ledger partition (pure).
//! - [`batch`]: a poll's records classified, and their offsets (pure).
//! - [`parked`]: what a parked record keeps, secrets redacted (pure).
//! - [`breaker`]: the poison breaker, fed each record's fate (pure).
//! - [`store`]: the one statement per batch (one round trip), positions,
//!   migrations, maintenance.
//! - [`observe`]: each operational event, its log line and metrics together.
//! - [`shutdown`]: stopping, as one small type passed down.
//! - [`kafka`]: settings, the offset-commit path, rebalances, where
//!   partitions start (the database's positions), probes, DLQ, and what a
//!   cluster's refusal (login, certificate, protocol) tells the operator.
//! - [`inspect`]: `inventory-inbox inspect`, one event, order or record.
//! - [`operator`]: operator actions of the CLI and the console that need
//!   the database and the cluster (a move of positions, planned, counted).
//! - [`console`]: `inventory-inbox console`, the operator console in the
//!   browser, on the store's and the operator's functions.
//! - [`pipeline`]: the loop poll -> apply -> commit, retries, shutdown.
//! - [`metrics`]: the Prometheus metrics; `metrics::http` serves them at
//!   `/metrics` with `/healthz` and `/readyz`.
//! - [`telemetry`]: OpenTelemetry spans of batches, exported over OTLP.
//! - [`service`]: start-up wiring of `inventory-inbox run`.

pub mod batch;
pub mod breaker;
pub mod config;
pub mod console;
pub mod event;
pub mod inspect;
pub mod kafka;
mod metrics;
mod observe;
pub mod operator;
mod parked;
mod pipeline;
pub mod service;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod window;

/// A polled message as the service reads it (its headers, a key that is
/// not UTF-8 made text): the load generator reads a topic back with it.
pub use kafka::to_record;
