//! Every Prometheus metric of the service (docs/design.md#observability), defined and registered
//! once, and the small HTTP endpoint that serves them with `/healthz` and
//! `/readyz` (hyper's HTTP/1 server, within `Limits`: a slow or silent
//! client is closed after a header timeout, connections are bounded, and a
//! failing accept backs off instead of spinning).

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::shutdown::Shutdown;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

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
        for reason in crate::store::RETRY_REASONS {
            self.db_retries.with_label_values(&[reason]);
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

/// The bounds of the HTTP endpoint. It serves a scraper or two and the
/// probes: a handful of connections at once is the norm.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// A connection that has not sent a whole request head this long after
    /// it opened, or after its last answer (an idle keep-alive), is closed
    /// without an answer: a slow or silent client holds its place no longer.
    header_timeout: Duration,
    /// Connections served at once. One more is closed as soon as it is
    /// accepted, not queued behind the others: descriptors and memory stay
    /// bounded, and its client (a scraper at its next interval) gets a place
    /// once a header timeout has freed one.
    connections: usize,
    /// The longest a connection lives, whatever it is doing: the header
    /// timeout does not cover a client that never reads its answer.
    lifetime: Duration,
}

const LIMITS: Limits = Limits {
    header_timeout: Duration::from_secs(5),
    connections: 64,
    lifetime: Duration::from_secs(60),
};

/// The pause after a failed accept: with the descriptor table full (EMFILE)
/// every accept fails at once until a connection closes.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `/metrics`, `/healthz` and `/readyz` within `LIMITS` until
/// `finished`; then stops accepting, closes every connection (a scrape in
/// progress is cut) and returns once their tasks have ended.
pub async fn serve(listener: TcpListener, metrics: Metrics, finished: Shutdown) {
    serve_within(listener, metrics, finished, LIMITS).await
}

async fn serve_within(listener: TcpListener, metrics: Metrics, finished: Shutdown, limits: Limits) {
    let mut connections = JoinSet::new();
    tokio::select! {
        _ = finished.asked() => {}
        () = accept(&listener, &metrics, limits, &mut connections) => {}
    }
    connections.shutdown().await;
}

/// Accepts connections until dropped, each served by a task in
/// `connections`.
async fn accept(
    listener: &TcpListener,
    metrics: &Metrics,
    limits: Limits,
    connections: &mut JoinSet<()>,
) {
    let mut accept_failed = Throttled::default();
    let mut over_limit = Throttled::default();
    loop {
        let accepted = listener.accept().await;
        // Connections that have closed give up their places.
        while let Some(ended) = connections.try_join_next() {
            if let Err(error) = ended {
                tracing::warn!(%error, "a metrics endpoint connection ended abnormally");
            }
        }
        match accepted {
            Err(error) => {
                if let Some(suppressed) = accept_failed.due(Instant::now()) {
                    tracing::warn!(%error, suppressed, "the metrics endpoint could not accept a connection; retrying in {ACCEPT_BACKOFF:?}");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
            Ok((socket, peer)) if connections.len() >= limits.connections => {
                drop(socket);
                if let Some(suppressed) = over_limit.due(Instant::now()) {
                    tracing::warn!(%peer, suppressed, limit = limits.connections, "the metrics endpoint serves as many connections as it may; closed a new one");
                }
            }
            Ok((socket, _)) => {
                connections.spawn(serve_connection(socket, metrics.clone(), limits));
            }
        }
    }
}

/// Serves one connection's requests until the client closes it, its header
/// timeout passes, or its lifetime ends.
async fn serve_connection(socket: TcpStream, metrics: Metrics, limits: Limits) {
    let answer = service_fn(move |request: Request<Incoming>| {
        std::future::ready(Ok::<_, Infallible>(answer(&metrics, request.uri().path())))
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(socket), answer);
    match tokio::time::timeout(limits.lifetime, connection).await {
        Ok(Ok(())) => {}
        // A header timeout, a malformed request, a client gone: the client's
        // business, not the service's.
        Ok(Err(error)) => tracing::debug!(%error, "a metrics endpoint connection closed"),
        Err(_) => {
            tracing::debug!("a metrics endpoint connection closed at the end of its lifetime")
        }
    }
}

/// The answer for `path`, whatever the method (to a HEAD, hyper sends the
/// head only).
fn answer(metrics: &Metrics, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain";
    let readiness = &metrics.readiness;
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => (StatusCode::OK, TEXT, "ok\n".to_owned()),
        "/readyz" if readiness.is_ready() => (StatusCode::OK, TEXT, "ready\n".to_owned()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            format!(
                "not ready: partitions_assigned={} database_reachable={} draining={} consume_failing={} poison_breaker_open={}\n",
                readiness.partitions_assigned.load(Ordering::Relaxed),
                readiness.database_reachable.load(Ordering::Relaxed),
                readiness.draining.load(Ordering::Relaxed),
                readiness.consume_failing.load(Ordering::Relaxed),
                readiness.breaker_open.load(Ordering::Relaxed)
            ),
        ),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A warning written at most once a second however often its cause recurs
/// (a full descriptor table fails thousands of accepts a second); each line
/// counts the occurrences left unwritten since the one before.
#[derive(Default)]
struct Throttled {
    last_written: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    const EVERY: Duration = Duration::from_secs(1);

    /// Whether to write this occurrence: then how many went unwritten
    /// before it.
    fn due(&mut self, now: Instant) -> Option<u64> {
        if self
            .last_written
            .is_some_and(|last| now.duration_since(last) < Self::EVERY)
        {
            self.suppressed += 1;
            return None;
        }
        self.last_written = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// Binds the metrics address; a clear error when it is taken.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

    #[test]
    fn a_recurring_warning_is_written_once_a_second_with_the_count_it_folded() {
        let mut throttled = Throttled::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(throttled.due(at(0)), Some(0));
        assert_eq!(throttled.due(at(10)), None);
        assert_eq!(throttled.due(at(999)), None);
        assert_eq!(throttled.due(at(1_000)), Some(2));
        assert_eq!(throttled.due(at(5_000)), Some(0));
    }

    /// A server on a free loopback port and the means to stop it.
    struct Endpoint {
        address: SocketAddr,
        metrics: Metrics,
        finish: crate::shutdown::Trigger,
        server: tokio::task::JoinHandle<()>,
    }

    async fn start(limits: Limits) -> Endpoint {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        let metrics = Metrics::new();
        let (finish, finished) = crate::shutdown::channel();
        let server = tokio::spawn(serve_within(listener, metrics.clone(), finished, limits));
        Endpoint {
            address,
            metrics,
            finish,
            server,
        }
    }

    /// What a server answered: status, `Content-Type`, body.
    type Answer = (u16, String, String);

    /// One request as a plain HTTP/1.0 client sends it (like the tests'
    /// and the load generator's scrapers); None when the connection is
    /// closed or refused without an answer.
    async fn request(address: SocketAddr, method: &str, path: &str) -> Option<Answer> {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream
            .write_all(format!("{method} {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let response = String::from_utf8(response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        let content_type = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })?;
        Some((status, content_type, body.to_owned()))
    }

    /// Whether the server closed the connection without a byte of answer
    /// (an orderly close, or a reset when it closed unread input).
    async fn closed_without_answer(stream: &mut tokio::net::TcpStream) -> bool {
        let mut answer = Vec::new();
        match stream.read_to_end(&mut answer).await {
            Ok(_) => answer.is_empty(),
            Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    const TEXT: &str = "text/plain";
    const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

    #[tokio::test]
    async fn the_endpoints_answer_their_paths_with_their_statuses_and_bodies() {
        let endpoint = start(LIMITS).await;
        let get = |path| request(endpoint.address, "GET", path);

        let (status, content_type, body) = get("/metrics").await.unwrap();
        assert_eq!((status, content_type.as_str()), (200, EXPOSITION));
        assert!(body.contains("\ninbox_processed_total 0\n"), "{body}");
        assert_eq!(
            get("/healthz").await,
            Some((200, TEXT.into(), "ok\n".into()))
        );
        assert_eq!(
            get("/readyz").await,
            Some((
                503,
                TEXT.into(),
                "not ready: partitions_assigned=false database_reachable=false draining=false consume_failing=false poison_breaker_open=false\n"
                    .into()
            ))
        );
        let readiness = &endpoint.metrics.readiness;
        readiness.partitions_assigned.store(true, Ordering::Relaxed);
        readiness.database_reachable.store(true, Ordering::Relaxed);
        assert_eq!(
            get("/readyz").await,
            Some((200, TEXT.into(), "ready\n".into()))
        );
        assert_eq!(
            get("/nothing").await,
            Some((404, TEXT.into(), "not found\n".into()))
        );
        // The path alone picks the answer: not the method, not a query.
        for (method, path) in [("POST", "/healthz"), ("GET", "/healthz?probe=1")] {
            assert_eq!(
                request(endpoint.address, method, path).await,
                Some((200, TEXT.into(), "ok\n".into())),
                "{method} {path}"
            );
        }
        let mut garbage = tokio::net::TcpStream::connect(endpoint.address)
            .await
            .unwrap();
        garbage.write_all(b"NOT HTTP\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        garbage.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        endpoint.finish.ask();
        endpoint.server.await.unwrap();
    }

    #[tokio::test]
    async fn slow_clients_beyond_the_connection_limit_do_not_starve_the_scrape() {
        let limits = Limits {
            header_timeout: Duration::from_secs(1),
            connections: 4,
            ..LIMITS
        };
        let endpoint = start(limits).await;
        // Three times the limit: half send half a request line, half
        // nothing at all, and then they wait.
        let opened = Instant::now();
        let mut slow = Vec::new();
        for n in 0..3 * limits.connections {
            let mut stream = tokio::net::TcpStream::connect(endpoint.address)
                .await
                .unwrap();
            if n % 2 == 0 {
                stream.write_all(b"GET /metrics HT").await.unwrap();
            }
            slow.push(stream);
        }

        // A scraper retries a refused connection at its next interval; here
        // every 50 ms. It is answered once the header timeout has freed a
        // place, long before this bound.
        let scrape = async {
            loop {
                match request(endpoint.address, "GET", "/metrics").await {
                    Some((200, _, body)) => return body,
                    _ => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        };
        let body = tokio::time::timeout(Duration::from_secs(20), scrape)
            .await
            .expect("the scrape is answered despite the slow clients");
        assert!(body.contains("inbox_processed_total"));

        // Each slow client is closed without an answer: the first ones,
        // accepted in the order they connected, after the header timeout;
        // those over the limit at once.
        for (n, stream) in slow.iter_mut().enumerate() {
            let closed =
                tokio::time::timeout(Duration::from_secs(20), closed_without_answer(stream))
                    .await
                    .unwrap_or_else(|_| panic!("slow client {n} is still open"));
            assert!(closed, "slow client {n} was answered");
            if n < limits.connections {
                assert!(opened.elapsed() >= limits.header_timeout);
            }
        }
        endpoint.finish.ask();
        endpoint.server.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_closes_open_connections_and_ends_the_server() {
        // A header timeout longer than the test: only shutdown can close it.
        let limits = Limits {
            header_timeout: Duration::from_secs(600),
            ..LIMITS
        };
        let endpoint = start(limits).await;
        let mut idle = tokio::net::TcpStream::connect(endpoint.address)
            .await
            .unwrap();
        idle.write_all(b"GET /hea").await.unwrap();
        // The server serves it (the endpoint answers others meanwhile).
        assert!(request(endpoint.address, "GET", "/healthz").await.is_some());
        endpoint.finish.ask();
        tokio::time::timeout(Duration::from_secs(10), endpoint.server)
            .await
            .expect("the server ends at shutdown")
            .unwrap();
        assert!(closed_without_answer(&mut idle).await);
    }
}
