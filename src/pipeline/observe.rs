//! What the loop reports: each operational event is one type whose `emit`
//! writes its log line and moves its metrics together, so a counter and its
//! log line can never drift apart.

use std::time::Instant;

use crate::event::ParkReason;
use crate::metrics::Metrics;
use crate::parked::ParkedRow;
use crate::store::BatchOutcome;

/// One transaction committed: its size, and the time since its round's
/// first record was polled.
pub(super) struct BatchCommitted {
    pub size: usize,
    pub started: Instant,
}

impl BatchCommitted {
    pub fn emit(&self, metrics: &Metrics) {
        let elapsed = self.started.elapsed();
        metrics.batch_size.observe(self.size as f64);
        metrics.batch_duration.observe(elapsed.as_secs_f64());
        tracing::debug!(
            records = self.size,
            elapsed_ms = elapsed.as_secs_f64() * 1e3,
            "batch committed"
        );
    }
}

/// What a round's committed batches did: outcome counters and end-to-end
/// latency, then one [`RecordParked`] per record parked now.
pub(super) struct RoundApplied<'a> {
    pub outcome: &'a BatchOutcome,
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
    }
}

/// A record parked (not by an earlier delivery): its reason counted, and a
/// log line naming the event, the order, the producer's trace header, the
/// batch's trace id and the position; never a payload or a secret.
pub(super) struct RecordParked<'a> {
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
pub(super) struct BatchRolledBack<'a> {
    pub error: &'a crate::store::StoreError,
    pub retry_in: std::time::Duration,
}

impl BatchRolledBack<'_> {
    pub fn emit(&self, metrics: &Metrics) {
        let reason = self.error.retry_reason();
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
pub(super) struct ConsumeFailed<'a> {
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
