//! A member that stalls (SIGSTOP: no polls, no heartbeats) longer than its
//! session while another member takes its partitions, then wakes up with
//! work in hand: nothing is applied twice or lost, and its late work moves
//! no position backwards, in the database or in Kafka.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

const PARTITIONS: i32 = 4;
const SKUS: [&str; 5] = ["SKU-1", "SKU-2", "SKU-3", "SKU-4", "SKU-5"];

/// Every decrease seen by sampling a per-partition value over time.
#[derive(Default)]
struct Monotonic {
    last: BTreeMap<i32, i64>,
    decreases: Vec<String>,
}

impl Monotonic {
    fn observe(&mut self, what: &str, values: impl IntoIterator<Item = (i32, i64)>) {
        for (partition, value) in values {
            if let Some(before) = self.last.insert(partition, value) {
                if value < before {
                    self.decreases.push(format!(
                        "{what} of partition {partition}: {before} -> {value}"
                    ));
                }
            }
        }
    }
}

#[tokio::test]
async fn a_stalled_member_that_wakes_up_moves_nothing_backwards() {
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    let stock: Vec<(&str, i64)> = SKUS.iter().map(|sku| (*sku, 1_000_000)).collect();
    db.seed_stock(&stock).await;
    let traffic = Traffic::orders("ZOMBIE", &SKUS, 4_000, 40, 7);
    // About 16 s of traffic at 250 records/s.
    let sending = traffic.produce_paced(producer(), &topic, 25, Duration::from_millis(100));

    // Positions (database) and committed offsets (Kafka), sampled all along.
    let positions = Arc::new(Mutex::new(Monotonic::default()));
    let committed = Arc::new(Mutex::new(Monotonic::default()));
    let sampling = {
        let (positions, committed) = (positions.clone(), committed.clone());
        let pool = db.pool.clone();
        let topic = topic.clone();
        move |group: String| {
            tokio::spawn(async move {
                loop {
                    let rows: Vec<(i32, i64)> =
                        sqlx::query_as("SELECT kafka_partition, next_offset FROM inbox_position")
                            .fetch_all(&pool)
                            .await
                            .expect("read positions");
                    positions.lock().unwrap().observe("position", rows);
                    let kafka = committed_offsets(&group, &topic, PARTITIONS);
                    committed.lock().unwrap().observe(
                        "committed offset",
                        kafka.into_iter().filter(|(_, o)| *o >= 0),
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        }
    };

    // Stalled past max.poll.interval.ms as well as past its session.
    let spec = ConsumerSpec::new(&db, &topic)
        .env("DB_POOL_SIZE", "2")
        .env("KAFKA_PROPERTY_MAX_POLL_INTERVAL_MS", "7000");
    let sampler = sampling(spec.group.clone());
    let stalled = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the first member applying",
        || async { db.ledger_rows().await >= 500 },
    )
    .await;
    stalled.signal(libc::SIGSTOP);
    let frozen_at = db.ledger_rows().await;

    // The other member gets the partitions once the stalled one's session
    // (6 s) is over, and goes on.
    let other = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the other member taking over",
        || async { other.metric("inbox_processed_total").await >= 300.0 },
    )
    .await;
    assert!(db.ledger_rows().await > frozen_at + 200);

    // The stalled member wakes up with whatever it held; it finds itself
    // out of the group, and joins again.
    stalled.signal(libc::SIGCONT);
    sending.await.expect("producing");
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        traffic.records.len() as i64,
        Duration::from_secs(120),
    )
    .await;
    wait_for_ledger(&db, traffic.unique_events, Duration::from_secs(30)).await;
    sampler.abort();
    let woke_log = stalled.log_text();
    other.stop().await;
    stalled.stop().await;

    traffic.assert_applied_once(&db).await;
    let positions = positions.lock().unwrap();
    assert_eq!(
        positions.decreases,
        Vec::<String>::new(),
        "positions only move forward"
    );
    assert_eq!(
        positions.last.values().sum::<i64>(),
        traffic.records.len() as i64,
        "positions at the end of every partition"
    );
    assert_eq!(
        committed.lock().unwrap().decreases,
        Vec::<String>::new(),
        "committed offsets only move forward"
    );
    // It was put out of the group while stalled, and joined again. Which
    // way it learns so depends on timing: its own session timer
    // (SESSTMOUT) or the coordinator's answer to a heartbeat or commit
    // (UnknownMemberId).
    assert!(
        woke_log.contains("session timed out") || woke_log.contains("UnknownMemberId"),
        "the stalled member's session ended: {woke_log}"
    );
    assert!(
        woke_log.matches("partitions assigned").count() >= 2,
        "the stalled member joined again: {woke_log}"
    );
}
