//! Every Prometheus metric of the service (docs/design.md#observability),
//! defined and registered once, and what `/readyz` reads. The small HTTP
//! endpoint that serves them is [`http`].

mod http;

pub use http::{bind, serve};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::batch::InboundRecord;
use crate::event::ParkReason;

/// Latency buckets in seconds: fine steps between 5 and 60 ms so a p95 near
/// the 45 ms budget is read to within a few milliseconds.
const LATENCY_BUCKETS: [f64; 27] = [
    0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025,
    0.03, 0.035, 0.04, 0.045, 0.05, 0.055, 0.06, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5,
];

/// End-to-end latency reaches seconds while a backlog drains.
const END_TO_END_BUCKETS: [f64; 30] = [
    0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025, 0.03,
    0.035, 0.04, 0.045, 0.05, 0.055, 0.06, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

const BATCH_SIZE_BUCKETS: [f64; 11] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 50.0, 75.0, 100.0, 250.0, 500.0,
];

/// The service's metrics. Cloning shares the same series.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub processed: IntCounter,
    pub duplicate_ignored: IntCounter,
    pub business_duplicate: IntCounter,
    pub parked: IntCounterVec,
    pub reservation_lines: IntCounterVec,
    pub batch_size: Histogram,
    pub batch_duration: Histogram,
    /// The batch statement's round trip, by consumer name.
    pub statement_duration: HistogramVec,
    pub end_to_end_latency: Histogram,
    pub db_retries: IntCounterVec,
    pub offset_commit_failures: IntCounter,
    /// Copies of parked records the DLQ topic did not take.
    pub dlq_publish_failures: IntCounter,
    /// Errors the Kafka consumer returned instead of a record (the log
    /// names each).
    pub consume_errors: IntCounter,
    pub consumer_lag: IntGaugeVec,
    /// Set from `lag_clock` at each scrape.
    consumer_lag_seconds: GaugeVec,
    pub lag_clock: Arc<LagClock>,
    pub rebalances: IntCounterVec,
    pub id_conflicts: IntCounter,
    pub position_gaps: IntCounter,
    pub topic_retention: IntGauge,
    /// 1 while the poison breaker holds consumption.
    pub poison_breaker_open: IntGauge,
    /// Closed days of the ledger looked up in full (no clean filter).
    pub ledger_filters_stale: IntGauge,
    /// Health flags read by `/readyz`.
    pub readiness: Arc<Readiness>,
}

/// What `/readyz` reports: ready when the consumer has partitions assigned,
/// the database answered its last batch or check, it is not draining, and
/// the consumer is not returning errors instead of records.
#[derive(Default)]
pub struct Readiness {
    pub partitions_assigned: AtomicBool,
    pub database_reachable: AtomicBool,
    /// Shutdown asked: finishing the batch in hand, taking no new work.
    pub draining: AtomicBool,
    /// The consumer returned errors instead of records several times in a
    /// row (e.g. a fetch that fails on the same offset again and again).
    pub consume_failing: AtomicBool,
    /// The poison breaker holds consumption until an operator resumes it.
    pub breaker_open: AtomicBool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.partitions_assigned.load(Ordering::Relaxed)
            && self.database_reachable.load(Ordering::Relaxed)
            && !self.draining.load(Ordering::Relaxed)
            && !self.consume_failing.load(Ordering::Relaxed)
            && !self.breaker_open.load(Ordering::Relaxed)
    }
}

/// Makes each metric and registers it, once.
struct Registrar<'a>(&'a Registry);

impl Registrar<'_> {
    fn register<M: prometheus::core::Collector + Clone + 'static>(&self, metric: M) -> M {
        self.0
            .register(Box::new(metric.clone()))
            .expect("registered once");
        metric
    }

    fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.register(IntCounter::new(name, help).expect("valid metric"))
    }

    fn counter_vec(&self, name: &str, help: &str, label: &str) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric"))
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.register(IntGauge::new(name, help).expect("valid metric"))
    }

    fn gauge_vec<M: prometheus::core::Collector + Clone + 'static>(
        &self,
        made: prometheus::Result<M>,
    ) -> M {
        self.register(made.expect("valid metric"))
    }

    fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        self.register(
            Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
                .expect("valid metric"),
        )
    }

    fn histogram_vec(&self, name: &str, help: &str, label: &str, buckets: &[f64]) -> HistogramVec {
        self.register(
            HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                &[label],
            )
            .expect("valid metric"),
        )
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let add = Registrar(&registry);
        let metrics = Metrics {
            processed: add.counter(
                "inbox_processed_total",
                "Fresh events applied (ledger row written), business duplicates included.",
            ),
            duplicate_ignored: add.counter(
                "inbox_duplicate_ignored_total",
                "Records whose message id was already in the ledger: acknowledged, no effect.",
            ),
            business_duplicate: add.counter(
                "inbox_business_duplicate_total",
                "Fresh events whose every (order_id, sku) was already reserved.",
            ),
            parked: add.counter_vec(
                "inbox_parked_total",
                "Records parked in inbox_parked, by reason code.",
                "reason",
            ),
            reservation_lines: add.counter_vec(
                "inventory_reservation_lines_total",
                "Order lines recorded, by status (reserved or rejected).",
                "status",
            ),
            batch_size: add.histogram(
                "inbox_batch_size",
                "Records per batch (one database transaction).",
                &BATCH_SIZE_BUCKETS,
            ),
            batch_duration: add.histogram(
                "inbox_batch_duration_seconds",
                "From the first record of a batch polled to its database commit.",
                &LATENCY_BUCKETS,
            ),
            statement_duration: add.histogram_vec(
                "inbox_db_statement_duration_seconds",
                "The batch statement's round trip, sent to answered, its commit included: \
                 the database's share of a batch.",
                "consumer",
                &LATENCY_BUCKETS,
            ),
            end_to_end_latency: add.histogram(
                "inbox_end_to_end_latency_seconds",
                "From the event time to the database commit that applied it.",
                &END_TO_END_BUCKETS,
            ),
            db_retries: add.counter_vec(
                "inbox_db_retries_total",
                "Batches rolled back by a transient database error and retried, by reason.",
                "reason",
            ),
            offset_commit_failures: add.counter(
                "inbox_offset_commit_failures_total",
                "Kafka offset commits that failed (the next commit covers them).",
            ),
            dlq_publish_failures: add.counter(
                "inbox_dlq_publish_failures_total",
                "Copies of parked records that could not be queued for or delivered to the DLQ topic (the parked row in the database stays).",
            ),
            consume_errors: add.counter(
                "inbox_consume_errors_total",
                "Errors the Kafka consumer returned instead of a record (a fetch that fails, a topic it cannot read); the log names each.",
            ),
            consumer_lag: add.gauge_vec(
                IntGaugeVec::new(
                    Opts::new(
                        "inbox_consumer_lag",
                        "Records between the committed offset and the high watermark, per partition.",
                    ),
                    &["partition"],
                ),
            ),
            consumer_lag_seconds: add.gauge_vec(
                prometheus::GaugeVec::new(
                    Opts::new(
                        "inbox_consumer_lag_seconds",
                        "Age of the oldest record of the partition this member has received and not yet applied (its Kafka timestamp to now); 0 when it holds none. Per owned partition.",
                    ),
                    &["partition"],
                ),
            ),
            lag_clock: Arc::new(LagClock::default()),
            rebalances: add.counter_vec(
                "inbox_rebalances_total",
                "Consumer group rebalances seen by this consumer, by kind (assign, revoke).",
                "kind",
            ),
            id_conflicts: add.counter(
                "inbox_id_conflict_total",
                "Records whose message id is in the ledger with a different payload.",
            ),
            position_gaps: add.counter(
                "inbox_position_gap_records_total",
                "Records the database has no position past that the topic no longer holds (retention deleted them before a restored database could re-read them).",
            ),
            topic_retention: add.gauge(
                "inbox_topic_retention_seconds",
                "The source topic's retention.ms, in seconds (-1: unlimited or unknown).",
            ),
            poison_breaker_open: add.gauge(
                "inbox_poison_breaker_open",
                "1 while the poison breaker holds consumption: too many records in a row, or too large a share, were parked; `inventory-inbox breaker resume` resumes it.",
            ),
            ledger_filters_stale: add.gauge(
                "inbox_ledger_filters_stale",
                "Closed days of the ledger (two days old or older) without a clean filter, looked up in full by every batch until maintenance builds theirs (docs/design.md#the-filter-of-closed-days); -1 until known.",
            ),
            readiness: Arc::new(Readiness::default()),
            registry,
        };
        metrics.ledger_filters_stale.set(-1);
        metrics.start_series();
        metrics
    }

    /// Series that exist from the start, so dashboards show zeros, not gaps.
    fn start_series(&self) {
        for reason in ParkReason::ALL {
            self.parked.with_label_values(&[reason.as_str()]);
        }
        for status in ["reserved", "rejected"] {
            self.reservation_lines.with_label_values(&[status]);
        }
        for kind in ["assign", "revoke"] {
            self.rebalances.with_label_values(&[kind]);
        }
        for reason in crate::store::RetryReason::ALL {
            self.db_retries.with_label_values(&[reason.as_str()]);
        }
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        self.set_lag_seconds(chrono::Utc::now().timestamp_millis());
        self.render_without_refresh()
    }

    fn render_without_refresh(&self) -> String {
        let mut buffer = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .expect("text encoding cannot fail");
        String::from_utf8(buffer).expect("exposition is UTF-8")
    }
}

impl Metrics {
    /// Lag in seconds of every partition this member owns.
    fn set_lag_seconds(&self, now_ms: i64) {
        self.consumer_lag_seconds.reset();
        for (partition, age) in self.lag_clock.ages(now_ms) {
            self.consumer_lag_seconds
                .with_label_values(&[&partition.to_string()])
                .set(age);
        }
    }
}

/// Per partition this member owns, the oldest record it holds and has not
/// yet applied: its offset and Kafka timestamp. The rebalance callback tells
/// it the partitions owned, the pipeline what it holds after each step; a
/// scrape reads the ages.
#[derive(Default)]
pub struct LagClock {
    clock: Mutex<Clock>,
}

#[derive(Default)]
struct Clock {
    owned: BTreeSet<i32>,
    oldest: BTreeMap<i32, (i64, i64)>,
}

impl LagClock {
    /// The records this member holds unapplied now (after it gathered a
    /// round, applied one, or polled while retrying): each partition's
    /// oldest of them. Called once per round, not per record.
    pub fn holding<'a>(&self, held: impl Iterator<Item = &'a InboundRecord>) {
        let mut oldest: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
        for record in held {
            if let Some(timestamp) = record.timestamp {
                let entry = oldest
                    .entry(record.partition)
                    .or_insert((record.offset, timestamp));
                if record.offset < entry.0 {
                    *entry = (record.offset, timestamp);
                }
            }
        }
        let mut clock = self.clock.lock().expect("lag clock lock");
        oldest.retain(|partition, _| clock.owned.contains(partition));
        clock.oldest = oldest;
    }

    /// The partitions this member owns now (after a rebalance); what it
    /// held of others is no longer its lag.
    pub fn owned(&self, partitions: impl Iterator<Item = i32>) {
        let mut clock = self.clock.lock().expect("lag clock lock");
        clock.owned = partitions.collect();
        let Clock { owned, oldest } = &mut *clock;
        oldest.retain(|partition, _| owned.contains(partition));
    }

    /// Each owned partition's age of its oldest unapplied record, in
    /// seconds; 0 for one that holds none.
    fn ages(&self, now_ms: i64) -> BTreeMap<i32, f64> {
        let clock = self.clock.lock().expect("lag clock lock");
        clock
            .owned
            .iter()
            .map(|partition| {
                let age = clock.oldest.get(partition).map_or(0.0, |(_, timestamp)| {
                    (now_ms - timestamp).max(0) as f64 / 1e3
                });
                (*partition, age)
            })
            .collect()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64, timestamp: i64) -> InboundRecord {
        InboundRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp: Some(timestamp),
            key: None,
            payload: None,
            headers: vec![],
        }
    }

    #[test]
    fn lag_in_seconds_is_the_age_of_the_oldest_unapplied_record() {
        let clock = LagClock::default();
        clock.owned([0, 1].into_iter());
        let held = [
            record(0, 11, 1_500),
            record(0, 10, 1_000),
            record(1, 4, 2_000),
        ];
        clock.holding(held.iter());
        assert_eq!(clock.ages(3_000), BTreeMap::from([(0, 2.0), (1, 1.0)]));
        // Offset 10 applied: 11 is the oldest of partition 0 now.
        clock.holding([&held[0], &held[2]].into_iter());
        assert_eq!(clock.ages(3_000), BTreeMap::from([(0, 1.5), (1, 1.0)]));
        // A partition read again from an earlier offset: its oldest is older.
        clock.holding([record(0, 3, 500)].iter());
        assert_eq!(clock.ages(3_000), BTreeMap::from([(0, 2.5), (1, 0.0)]));
        // Everything applied: nothing is late.
        clock.holding([].iter());
        assert_eq!(clock.ages(3_000), BTreeMap::from([(0, 0.0), (1, 0.0)]));
    }

    #[test]
    fn a_revoked_partition_has_no_lag_here() {
        let clock = LagClock::default();
        clock.owned([2, 3].into_iter());
        clock.holding([record(3, 0, 0)].iter());
        clock.owned([2].into_iter());
        assert_eq!(clock.ages(1_000), BTreeMap::from([(2, 0.0)]));
    }

    #[test]
    fn every_owned_partition_has_a_lag_in_seconds_at_each_scrape() {
        let metrics = Metrics::new();
        metrics.lag_clock.owned([0, 1].into_iter());
        metrics.lag_clock.holding([record(1, 40, 1_000)].iter());
        metrics.set_lag_seconds(1_250);
        let text = metrics.render_without_refresh();
        assert!(text.contains("inbox_consumer_lag_seconds{partition=\"0\"} 0\n"));
        assert!(text.contains("inbox_consumer_lag_seconds{partition=\"1\"} 0.25\n"));
    }
}
