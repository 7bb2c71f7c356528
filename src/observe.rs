//! What the service reports: each operational event is one type whose
//! `emit` writes its log line and moves its metrics together, so a counter
//! and its log line can never drift apart. The pipeline's events (a batch,
//! a round, a record parked, a rollback, a consume error, a position
//! behind) and the Kafka side's (a rebalance, an offset commit failed, a
//! position gap, a DLQ copy failed) alike.

use std::time::{Duration, Instant};

use crate::event::ParkReason;
use crate::metrics::Metrics;
use crate::parked::ParkedRow;
use crate::store::{BatchOutcome, Decision, DecisionOutcome, DECISIONS};

/// One transaction committed: its size, the time since its round's first
/// record was polled, and the round trip of each of its statements, under
/// the consumer's name.
pub(crate) struct BatchCommitted<'a> {
    pub size: usize,
    pub started: Instant,
    pub statements: &'a [Duration],
    pub consumer: &'a str,
}

impl BatchCommitted<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let elapsed = self.started.elapsed();
        metrics.batch_size.observe(self.size as f64);
        metrics.batch_duration.observe(elapsed.as_secs_f64());
        let statement = metrics
            .statement_duration
            .with_label_values(&[self.consumer]);
        for round_trip in self.statements {
            statement.observe(round_trip.as_secs_f64());
        }
        tracing::debug!(
            records = self.size,
            elapsed_ms = elapsed.as_secs_f64() * 1e3,
            "batch committed"
        );
    }
}

/// What a round's committed batches did: outcome counters and end-to-end
/// latency, then one [`RecordParked`] per record parked now, and one line
/// of the decision log per record while it is on.
pub(crate) struct RoundApplied<'a> {
    pub outcome: &'a BatchOutcome,
    pub consumer: &'a str,
}

impl RoundApplied<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let outcome = self.outcome;
        metrics.processed.inc_by(outcome.processed);
        metrics.duplicate_ignored.inc_by(outcome.duplicates);
        metrics
            .business_duplicate
            .inc_by(outcome.business_duplicates);
        metrics
            .reservation_lines
            .with_label_values(&["reserved"])
            .inc_by(outcome.lines_reserved);
        metrics
            .reservation_lines
            .with_label_values(&["rejected"])
            .inc_by(outcome.lines_rejected);
        let now = chrono::Utc::now();
        for occurred_at in &outcome.fresh_event_times {
            let latency = (now - *occurred_at).num_microseconds().unwrap_or(i64::MAX);
            metrics
                .end_to_end_latency
                .observe(latency.max(0) as f64 / 1e6);
        }
        for row in &outcome.newly_parked {
            RecordParked { row }.emit(metrics);
        }
        for decision in &outcome.decisions {
            RecordDecided {
                decision,
                consumer: self.consumer,
            }
            .emit();
        }
    }
}

/// One record's line of the decision log: its outcome, event id, order,
/// position, the consumer's name, the event's type and schema version, and
/// a parked record's reason (its error class); never a payload.
pub(crate) struct RecordDecided<'a> {
    pub decision: &'a Decision,
    pub consumer: &'a str,
}

impl RecordDecided<'_> {
    pub fn emit(&self) {
        let decision = self.decision;
        let error_class = match decision.outcome {
            DecisionOutcome::Parked(reason) => reason.as_str(),
            _ => "",
        };
        tracing::debug!(
            target: DECISIONS,
            outcome = decision.outcome.as_str(),
            message_id = decision.message_id.map(|id| id.to_string()).unwrap_or_default(),
            order_id = decision.order_id.as_deref().unwrap_or_default(),
            topic = %decision.topic,
            partition = decision.partition,
            offset = decision.offset,
            consumer = self.consumer,
            event_type = crate::event::EVENT_TYPE,
            schema_version = crate::event::SCHEMA_VERSION,
            error_class,
            "record decided"
        );
    }
}

/// A record parked (not by an earlier delivery): its reason counted, and a
/// log line naming the event, the order, the producer's trace header, the
/// batch's trace id and the position; never a payload or a secret.
pub(crate) struct RecordParked<'a> {
    pub row: &'a ParkedRow,
}

impl RecordParked<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let row = self.row;
        metrics
            .parked
            .with_label_values(&[row.reason.as_str()])
            .inc();
        if row.reason == ParkReason::EventIdConflict {
            metrics.id_conflicts.inc();
        }
        tracing::warn!(
            message_id = row.message_id.map(|id| id.to_string()).unwrap_or_default(),
            order_id = row.order_id.as_deref().unwrap_or_default(),
            trace = row.trace.as_deref().unwrap_or_default(),
            trace_id = row.trace_id.as_deref().unwrap_or_default(),
            topic = %row.topic,
            partition = row.partition,
            offset = row.offset,
            reason = %row.reason,
            error = %row.error,
            "record parked"
        );
    }
}

/// A batch rolled back by the database, to be retried.
pub(crate) struct BatchRolledBack<'a> {
    pub error: &'a crate::store::StoreError,
    pub retry_in: std::time::Duration,
}

impl BatchRolledBack<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let reason = self.error.retry_reason().as_str();
        metrics.db_retries.with_label_values(&[reason]).inc();
        metrics
            .readiness
            .database_reachable
            .store(false, std::sync::atomic::Ordering::Relaxed);
        let error = self.error;
        let retry_in_ms = self.retry_in.as_millis() as u64;
        if matches!(error, crate::store::StoreError::Transient { .. }) {
            tracing::warn!(%error, retry_in_ms, "batch rolled back; retrying");
        } else {
            tracing::error!(%error, retry_in_ms, "batch failed; retrying");
        }
    }
}

/// The consumer returned an error instead of a record: counted, logged with
/// its code, and after [`ConsumeFailed::UNREADY_AFTER`] in a row without a
/// record `/readyz` turns unready (a fetch failing on one offset would
/// otherwise stop its partition silently).
pub(crate) struct ConsumeFailed<'a> {
    pub error: &'a rdkafka::error::KafkaError,
    /// Errors in a row, this one included.
    pub in_a_row: u32,
}

impl ConsumeFailed<'_> {
    pub const UNREADY_AFTER: u32 = 5;

    pub fn emit(&self, metrics: &Metrics) {
        let code = self
            .error
            .rdkafka_error_code()
            .map_or_else(|| "unknown".to_owned(), |code| format!("{code:?}"));
        metrics.consume_errors.inc();
        if self.in_a_row >= Self::UNREADY_AFTER {
            metrics
                .readiness
                .consume_failing
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        tracing::warn!(error = %self.error, code, in_a_row = self.in_a_row, "the Kafka consumer returned an error instead of a record");
    }
}

/// The database's position of a partition is behind what this member wrote
/// or read (restored, or failed over to a replica that lacked the last
/// commits), or an operator set it (`positions set`, either way): the
/// partition is read from there. Only the first is counted.
pub(crate) struct PositionBehind<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub position: Option<i64>,
    pub by_operator: bool,
}

impl PositionBehind<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let (topic, partition, position) = (self.topic, self.partition, self.position);
        if self.by_operator {
            tracing::info!(
                topic,
                partition,
                position = ?position,
                "an operator set the partition's position (`inventory-inbox positions set`): reading it from there"
            );
            return;
        }
        metrics
            .db_retries
            .with_label_values(&["position_behind"])
            .inc();
        tracing::error!(
            topic,
            partition,
            database_position = ?position,
            "the database is behind what this consumer applied (restored, or failed over to a replica that lacked the last commits): reading the partition again from the database's position"
        );
    }
}

/// A partition starts past its database position: the position is older
/// than the partition's log start (retention deleted those records). The
/// records among them the database never applied are lost, and counted
/// (`inbox_position_gap_records_total`); a position an operator set back
/// below the log start may lack none.
pub(crate) struct PositionGap<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub database_position: i64,
    pub log_start: i64,
    /// Of the records before the log start, those never applied.
    pub missing: i64,
}

impl PositionGap<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let missing = self.missing;
        if missing == 0 {
            tracing::warn!(
                topic = self.topic,
                partition = self.partition,
                database_position = self.database_position,
                log_start = self.log_start,
                "the position is older than the partition's earliest offset, but every record before that was applied: continuing from the earliest offset, nothing lost"
            );
            return;
        }
        metrics.position_gaps.inc_by(missing.unsigned_abs());
        tracing::error!(
            topic = self.topic,
            partition = self.partition,
            database_position = self.database_position,
            log_start = self.log_start,
            missing,
            "the database's position is older than the partition's earliest offset: {missing} records it lacks cannot be read again (retention deleted them); continuing from the earliest offset"
        );
    }
}

/// Partitions assigned to this member, or revoked from it.
pub(crate) enum Rebalanced<'a> {
    Assigned(&'a rdkafka::TopicPartitionList),
    Revoked(&'a rdkafka::TopicPartitionList),
}

impl Rebalanced<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let (kind, partitions) = match self {
            Rebalanced::Assigned(partitions) => ("assign", partitions),
            Rebalanced::Revoked(partitions) => ("revoke", partitions),
        };
        metrics.rebalances.with_label_values(&[kind]).inc();
        let numbers: Vec<String> = partitions
            .elements()
            .iter()
            .map(|e| e.partition().to_string())
            .collect();
        let (count, partitions) = (partitions.count(), numbers.join(","));
        match self {
            Rebalanced::Assigned(_) => tracing::info!(count, partitions, "partitions assigned"),
            Rebalanced::Revoked(_) => tracing::info!(count, partitions, "partitions revoked"),
        }
    }
}

/// Where an offset commit failed, which says what follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitStep {
    /// An asynchronous commit could not be sent: sent again with the
    /// unconfirmed offsets.
    NotSent,
    /// Kafka refused an asynchronous commit: sent again with the
    /// unconfirmed offsets.
    Refused,
    /// The commit before revoked partitions were released: their new owner
    /// rereads from the offset Kafka holds (duplicates are ignored).
    OnRevoke,
    /// The last commit at close: the next owner rereads the same way.
    OnClose,
}

/// An offset commit that failed (`inbox_offset_commit_failures_total`).
/// Never a loss: the database holds the positions, and what is read again
/// is ignored as a duplicate.
pub(crate) struct OffsetCommitFailed<'a> {
    pub error: &'a rdkafka::error::KafkaError,
    pub step: CommitStep,
}

impl OffsetCommitFailed<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        metrics.offset_commit_failures.inc();
        let then = match self.step {
            CommitStep::NotSent | CommitStep::Refused => "it is sent again",
            CommitStep::OnRevoke => "the new owner rereads (duplicates are ignored)",
            CommitStep::OnClose => "those records will be redelivered and ignored as duplicates",
        };
        let step = match self.step {
            CommitStep::NotSent => "not sent",
            CommitStep::Refused => "refused",
            CommitStep::OnRevoke => "on revoke",
            CommitStep::OnClose => "at close",
        };
        tracing::warn!(error = %self.error, step, "offset commit failed ({step}); {then}");
    }
}

/// A parked record's DLQ copy that failed (`inbox_dlq_publish_failures_total`):
/// the parked row still owes it, and its partition's owner sends it again.
pub(crate) struct DlqCopyFailed<'a> {
    pub error: &'a rdkafka::error::KafkaError,
    /// Queued and then not delivered, or not even queued.
    pub queued: bool,
}

impl DlqCopyFailed<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        metrics.dlq_publish_failures.inc();
        let error = self.error;
        if self.queued {
            tracing::warn!(%error, "DLQ copy not delivered; the parked row still owes it");
        } else {
            tracing::warn!(%error, "DLQ copy not queued; the parked row still owes it");
        }
    }
}

/// The poison breaker as this member sees it
/// (`inbox_poison_breaker_open`, and `/readyz`).
pub(crate) enum BreakerHeld<'a> {
    /// Held: consumption paused until an operator resumes it.
    Held { why: &'a str },
    /// An operator resumed it (`inventory-inbox breaker resume`).
    Resumed { by: Option<&'a str> },
    /// No longer held here: resumed, or the consumer stops.
    Released,
}

impl BreakerHeld<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let held = match self {
            BreakerHeld::Held { why } => {
                tracing::error!(
                    why,
                    "poison breaker open: consumption is held until `inventory-inbox breaker resume` (the records after it wait in Kafka; none is skipped)"
                );
                true
            }
            BreakerHeld::Resumed { by } => {
                tracing::info!(resumed_by = by, "poison breaker resumed: consuming again");
                return;
            }
            BreakerHeld::Released => false,
        };
        metrics.poison_breaker_open.set(i64::from(held));
        metrics
            .readiness
            .breaker_open
            .store(held, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn errors_instead_of_records_are_counted_and_several_in_a_row_make_it_unready() {
        let metrics = Metrics::new();
        let error = rdkafka::error::KafkaError::MessageConsumption(
            rdkafka::types::RDKafkaErrorCode::NotImplemented,
        );
        for in_a_row in 1..ConsumeFailed::UNREADY_AFTER {
            ConsumeFailed {
                error: &error,
                in_a_row,
            }
            .emit(&metrics);
        }
        assert!(!metrics.readiness.consume_failing.load(Ordering::Relaxed));
        ConsumeFailed {
            error: &error,
            in_a_row: ConsumeFailed::UNREADY_AFTER,
        }
        .emit(&metrics);
        assert!(metrics.readiness.consume_failing.load(Ordering::Relaxed));
        assert_eq!(
            metrics.consume_errors.get(),
            u64::from(ConsumeFailed::UNREADY_AFTER)
        );
    }
}
