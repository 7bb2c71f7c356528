//! A three-node Kafka cluster (replication 3, `min.insync.replicas=2`) of the
//! test's own, under paced traffic with exact duplicates, while brokers fail
//! the way they do in production:
//!
//! - the leader of the consumer's partitions killed with -9: the consumer
//!   goes on with the leaders the cluster elects, and catches up to the end
//!   while that broker is still dead (the outage is an election, not a
//!   restart);
//! - the group coordinator killed with -9 under a static member: the
//!   offsets are committed again and land on the new coordinator, while the
//!   old one is still dead (a member fenced by the move joins again);
//! - a rolling restart of the three brokers, one at a time, each back in
//!   sync before the next goes.
//!
//! Each reconciles exactly: every unique event applied once, nothing lost,
//! every partition's committed offset at its end. The clusters cost three
//! JVMs each: the tests here take turns.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::private_kafka::PrivateKafka;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tokio::sync::Mutex;

const PARTITIONS: i32 = 6;
/// Records produced per 100 ms: 150 events/s.
const RECORDS_PER_TICK: usize = 15;
const TICK: Duration = Duration::from_millis(100);
const DUPLICATE_EVERY: usize = 100;
const DUPLICATE_LAG: usize = 450;
/// Ledger rows to see before the first fault (about 2 s of traffic).
const ROWS_BEFORE_FAULT: i64 = 300;
const CATCH_UP: Duration = Duration::from_secs(90);
const SKUS: [&str; 5] = [
    "SKU-CLU-1",
    "SKU-CLU-2",
    "SKU-CLU-3",
    "SKU-CLU-4",
    "SKU-CLU-5",
];
/// Stock no run can exhaust, so every line is reserved.
const ON_HAND: i64 = 1_000_000;

/// One cluster at a time on the two cores.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// A cluster, a topic on it, a consumer of it, and traffic being produced.
struct Run {
    kafka: PrivateKafka,
    topic: String,
    db: TestDb,
    spec: ConsumerSpec,
    consumer: ConsumerProcess,
    traffic: Traffic,
    producing: tokio::task::JoinHandle<()>,
}

impl Run {
    /// Starts it all and waits until the consumer has applied
    /// `ROWS_BEFORE_FAULT` events (and so committed offsets).
    async fn start(prefix: &str, unique_events: usize) -> Run {
        Run::start_with(prefix, unique_events, &[]).await
    }

    async fn start_with(prefix: &str, unique_events: usize, env: &[(&str, &str)]) -> Run {
        let kafka = PrivateKafka::cluster(3);
        let topic = kafka.topic(PARTITIONS).await;
        let db = TestDb::new().await;
        db.seed_stock(&SKUS.map(|sku| (sku, ON_HAND))).await;
        let mut spec = ConsumerSpec::new(&db, &topic);
        spec.bootstrap = kafka.bootstrap();
        for (key, value) in env {
            spec = spec.env(key, value);
        }
        let consumer = spec.start();
        eprintln!("consumer log: {}", consumer.log.display());
        let traffic = Traffic::orders(prefix, &SKUS, unique_events, DUPLICATE_EVERY, DUPLICATE_LAG);
        let producing = traffic.produce_paced(
            producer_at(&kafka.bootstrap()),
            &topic,
            RECORDS_PER_TICK,
            TICK,
        );
        wait_until(
            Duration::from_secs(60),
            &format!("{ROWS_BEFORE_FAULT} ledger rows before the fault"),
            || async { db.ledger_rows().await >= ROWS_BEFORE_FAULT },
        )
        .await;
        Run {
            kafka,
            topic,
            db,
            spec,
            consumer,
            traffic,
            producing,
        }
    }

    /// The end offset of every partition.
    fn end_offsets(&self) -> BTreeMap<i32, i64> {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.kafka.bootstrap())
            .create()
            .expect("watermark client");
        (0..PARTITIONS)
            .map(|partition| {
                let (_, high) = client
                    .fetch_watermarks(&self.topic, partition, Duration::from_secs(10))
                    .expect("fetch watermarks");
                (partition, high)
            })
            .collect()
    }

    /// Waits for the producer, then until every unique event is in the
    /// ledger and every partition's committed offset is at its end.
    async fn wait_caught_up(&mut self, since: Instant) {
        (&mut self.producing).await.expect("the producer task");
        let ends = self.end_offsets();
        assert!(
            ends.values().sum::<i64>() >= self.traffic.records.len() as i64,
            "every acknowledged record is in the log: {ends:?}"
        );
        let deadline = Instant::now() + CATCH_UP;
        loop {
            assert!(
                self.consumer.child.try_wait().expect("try_wait").is_none(),
                "the consumer exited; log:\n{}",
                self.consumer.log_text()
            );
            let rows = self.db.ledger_rows().await;
            let committed = committed_offsets_at(
                &self.kafka.bootstrap(),
                &self.spec.group,
                &self.topic,
                PARTITIONS,
            );
            if rows == self.traffic.unique_events && committed == ends {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not caught up {CATCH_UP:?} after the producer finished: ledger rows {rows} \
                 of {}, committed {committed:?}, end offsets {ends:?}; consumer log:\n{}",
                self.traffic.unique_events,
                self.consumer.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("caught up {:?} after the fault began", since.elapsed());
    }

    /// Exactly once, every duplicate recognised, the consumer still running.
    async fn reconcile(self) {
        self.traffic.assert_applied_once(&self.db).await;
        let duplicates_sent =
            (self.traffic.records.len() as i64 - self.traffic.unique_events) as f64;
        let ignored = self.consumer.metric("inbox_duplicate_ignored_total").await;
        assert!(
            ignored >= duplicates_sent,
            "the {duplicates_sent} exact duplicates were recognised ({ignored})"
        );
        eprintln!(
            "records read again and absorbed by the ledger: {}; offset commit failures: {}",
            ignored - duplicates_sent,
            self.consumer
                .metric("inbox_offset_commit_failures_total")
                .await
        );
        self.consumer.stop().await;
    }

    /// Waits until the ledger grows by `rows` (or holds every event).
    async fn wait_progress(&self, rows: i64, what: &str) -> Duration {
        let from = self.db.ledger_rows().await;
        let started = Instant::now();
        wait_until(Duration::from_secs(60), what, || async {
            let now = self.db.ledger_rows().await;
            now >= from + rows || now == self.traffic.unique_events
        })
        .await;
        started.elapsed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partition_leader_killed_the_consumer_goes_on_with_the_elected_leaders() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut run = Run::start("ORD-LEADER", 3_000).await;
    // The broker leading most of the topic's partitions, other than the
    // group coordinator (whose loss the next test is about).
    let coordinator = run.kafka.coordinator(&run.spec.group);
    let leaders = run.kafka.leaders(&run.topic);
    let victim = run
        .kafka
        .ids()
        .into_iter()
        .filter(|&id| id != coordinator)
        .max_by_key(|id| leaders.values().filter(|&leader| leader == id).count())
        .expect("a node");
    let led: Vec<i32> = leaders
        .iter()
        .filter(|(_, &leader)| leader == victim)
        .map(|(&partition, _)| partition)
        .collect();
    assert!(
        !led.is_empty(),
        "node {victim} leads a partition: {leaders:?}"
    );
    eprintln!("killing node {victim}, leader of partitions {led:?} (coordinator {coordinator})");
    let fault = Instant::now();
    run.kafka.kill_node(victim);
    let stalled = run
        .wait_progress(200, "200 more ledger rows with the leader dead")
        .await;
    eprintln!("applying again {:?} after the leader was killed", stalled);
    run.wait_caught_up(fault).await;
    // Still dead: the partitions it led are led by the others now.
    let after = run.kafka.leaders(&run.topic);
    assert!(
        after
            .values()
            .all(|&leader| leader >= 0 && leader != victim),
        "every partition has a live leader: {after:?}"
    );
    run.reconcile().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_coordinator_killed_offsets_land_on_the_new_one() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    // A static member, as deployments that restart in place run it: when
    // the coordinator moves it may be fenced by its own instance id, and it
    // must join again by itself (the catch-up below fails if it exited).
    let mut run = Run::start_with(
        "ORD-COORD",
        3_000,
        &[("KAFKA_PROPERTY_GROUP_INSTANCE_ID", "inbox-0")],
    )
    .await;
    let coordinator = run.kafka.coordinator(&run.spec.group);
    eprintln!("killing node {coordinator}, the group coordinator");
    let fault = Instant::now();
    run.kafka.kill_node(coordinator);
    run.wait_progress(200, "200 more ledger rows with the coordinator dead")
        .await;
    // Committed to the end (read from the new coordinator) while the old
    // one is still dead.
    run.wait_caught_up(fault).await;
    eprintln!(
        "fenced and joined again: {}",
        run.consumer
            .log_text()
            .contains("joining the group again with a new consumer")
    );
    let moved = run.kafka.coordinator(&run.spec.group);
    assert_ne!(moved, coordinator, "the coordinator moved");
    assert!(moved >= 0, "the group has a live coordinator");
    run.reconcile().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_every_broker_loses_and_doubles_nothing() {
    let _turn = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut run = Run::start("ORD-ROLL", 6_000).await;
    let fault = Instant::now();
    for id in run.kafka.ids() {
        eprintln!("restarting node {id} ({:?} into the roll)", fault.elapsed());
        run.kafka.stop_node(id);
        run.wait_progress(100, &format!("100 more ledger rows with node {id} down"))
            .await;
        run.kafka.start_node(id);
        run.kafka.wait_in_sync(&run.topic);
    }
    eprintln!("roll done {:?} after it began", fault.elapsed());
    run.wait_caught_up(fault).await;
    run.reconcile().await;
}
