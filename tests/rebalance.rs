//! Two consumers share a group over 12 partitions; one of them leaves mid-run
//! (its partitions are revoked, committed and handed over): every event is
//! applied exactly once.

mod common;

use std::time::Duration;

use common::*;
use inventory_inbox::event::OrderPlaced;

#[tokio::test]
async fn a_consumer_leaving_mid_run_loses_and_doubles_nothing() {
    const PARTITIONS: i32 = 12;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000_000), ("SKU-2", 1_000_000_000)])
        .await;
    let events: Vec<OrderPlaced> = (0..6_000)
        .map(|i| {
            order(
                &format!("ORD-{i}"),
                &[(["SKU-1", "SKU-2"][i % 2], 1 + (i % 3) as i32)],
            )
        })
        .collect();
    let mut stream: Vec<Outgoing> = events.iter().map(Outgoing::event).collect();
    for i in (0..6_000).step_by(20) {
        stream.push(Outgoing::event(&events[i]));
    }
    let total = stream.len() as i64;

    let spec = ConsumerSpec::new(&db, &topic);
    let staying = spec.start();
    let leaving = spec.start();
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let producer = producer();
            for chunk in stream.chunks(300) {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    wait_until(
        Duration::from_secs(60),
        "both consumers applying",
        || async {
            staying.metric("inbox_processed_total").await > 0.0
                && leaving.metric("inbox_processed_total").await > 0.0
        },
    )
    .await;
    leaving.stop().await;
    producing.await.expect("producer task");

    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(db.ledger_rows().await, 6_000);
    let expected_sku1: i64 = (0..6_000)
        .filter(|i| i % 2 == 0)
        .map(|i| 1 + (i % 3) as i64)
        .sum();
    let expected_sku2: i64 = (0..6_000)
        .filter(|i| i % 2 == 1)
        .map(|i| 1 + (i % 3) as i64)
        .sum();
    assert_eq!(db.reserved("SKU-1").await, expected_sku1);
    assert_eq!(db.reserved("SKU-2").await, expected_sku2);
    assert_eq!(db.reservations().await.len(), 6_000);
    assert!(
        staying
            .metric("inbox_rebalances_total{kind=\"assign\"}")
            .await
            >= 2.0,
        "the staying consumer took over the leaver's partitions"
    );
    staying.stop().await;
}

#[tokio::test]
async fn a_rebalance_storm_loses_and_doubles_nothing() {
    storm("classic").await;
}

/// The same storm under Kafka 4's consumer group protocol (KIP-848): the
/// broker assigns, and the revoke and assign callbacks still drain, commit
/// and start at the database's positions.
#[tokio::test]
async fn a_rebalance_storm_under_the_consumer_protocol_loses_and_doubles_nothing() {
    storm("consumer").await;
}

async fn storm(protocol: &str) {
    const PARTITIONS: i32 = 12;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000_000)]).await;
    let events: Vec<OrderPlaced> = (0..8_000)
        .map(|i| order(&format!("ORD-{i}"), &[("SKU-1", 1 + i % 4)]))
        .collect();
    let mut stream: Vec<Outgoing> = events.iter().map(Outgoing::event).collect();
    for i in (0..8_000).step_by(10) {
        stream.push(Outgoing::event(&events[i]));
    }
    let total = stream.len() as i64;

    // Three members; one of them is stopped and replaced every second or so,
    // alternating graceful stops and kill -9, while the stream flows.
    let spec = ConsumerSpec::new(&db, &topic).env("GROUP_PROTOCOL", protocol);
    let mut members = vec![spec.start(), spec.start(), spec.start()];
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let producer = producer();
            for chunk in stream.chunks(400) {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    for round in 0..8 {
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let leaving = members.remove(round % members.len());
        if round % 2 == 0 {
            leaving.stop().await;
        } else {
            leaving.kill().await;
        }
        members.push(spec.start());
    }
    producing.await.expect("producer task");
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;

    assert_eq!(db.ledger_rows().await, 8_000);
    let expected: i64 = (0..8_000).map(|i| 1 + (i % 4) as i64).sum();
    assert_eq!(db.reserved("SKU-1").await, expected);
    assert_eq!(db.reservations().await.len(), 8_000);
    for member in members {
        member.stop().await;
    }
}

/// The partitions a consumer's log says were revoked from it.
fn revoked_partitions(log: &str) -> Vec<i32> {
    log.lines()
        .filter(|line| line.contains("partitions revoked"))
        .filter_map(|line| line.split("partitions=").nth(1))
        .flat_map(|list| {
            list.split_whitespace()
                .next()
                .unwrap_or("")
                .split(',')
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[tokio::test]
async fn partitions_revoked_while_other_lanes_apply_are_not_committed_afterwards() {
    const PARTITIONS: i32 = 12;
    const PER_PARTITION: i64 = 20;
    // Even partitions order the locked SKU, odd ones a free one, so that
    // whichever half is handed over holds partitions of both kinds.
    let hot = |partition: i32| partition % 2 == 0;
    const HOT_PARTITIONS: i32 = 6;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-HOT", 1_000_000), ("SKU-FREE", 1_000_000)])
        .await;
    // The consumer's sessions give up on a row lock after 200 ms: a
    // transient error, so its batch is retried with the partitions paused.
    sqlx::query(&format!(
        "ALTER DATABASE {} SET lock_timeout = '200ms'",
        db.name
    ))
    .execute(&db.pool)
    .await
    .expect("lock_timeout");
    let round = |round: usize, locked_sku: bool| -> Vec<Outgoing> {
        (0..PARTITIONS)
            .flat_map(|partition| {
                let sku = if locked_sku && hot(partition) {
                    "SKU-HOT"
                } else {
                    "SKU-FREE"
                };
                (0..PER_PARTITION).map(move |i| {
                    Outgoing::event(&order(&format!("ORD-{round}-{partition}-{i}"), &[(sku, 1)]))
                        .on_partition(partition)
                })
            })
            .collect()
    };
    produce(&producer(), &topic, &round(1, true)).await;

    // Held by the test: every batch naming SKU-HOT fails until released.
    let mut lock = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM inventory_stock WHERE sku = 'SKU-HOT' FOR UPDATE")
        .execute(&mut *lock)
        .await
        .expect("lock SKU-HOT");

    // A round that gathers the whole backlog in batches of one partition each,
    // one lane each:
    // the free partitions' batches commit while the hot ones are retried.
    let spec = ConsumerSpec::new(&db, &topic)
        .env("DB_POOL_SIZE", "12")
        .env("INBOX_LANES_FROM_ROUND_TRIP_MS", "0")
        .env("BATCH_MAX_RECORDS", "20")
        .env("BATCH_LINGER_MS", "500");
    let first = spec.start();
    let free_records = i64::from(PARTITIONS - HOT_PARTITIONS) * PER_PARTITION;
    wait_until(
        Duration::from_secs(60),
        "the free partitions applied, the hot ones retried",
        || async {
            db.ledger_rows().await == free_records
                && first
                    .metric("inbox_db_retries_total{reason=\"lock_not_available\"}")
                    .await
                    > 0.0
        },
    )
    .await;

    // A second member takes half of the partitions while the first is still
    // retrying the round: some of those it hands over were applied by it.
    let second = spec.start();
    wait_until(
        Duration::from_secs(60),
        "partitions handed over",
        || async {
            !revoked_partitions(&first.log_text()).is_empty()
                && second
                    .metric("inbox_rebalances_total{kind=\"assign\"}")
                    .await
                    > 0.0
        },
    )
    .await;
    let handed_over = revoked_partitions(&first.log_text());
    assert!(
        handed_over.iter().any(|p| !hot(*p)),
        "a partition the first member applied during the round was revoked: {handed_over:?}"
    );
    produce(&producer(), &topic, &round(2, false)).await;
    lock.commit().await.expect("release SKU-HOT");

    let total = i64::from(PARTITIONS) * PER_PARTITION * 2;
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;
    // The first member's last commit (on shutdown) must not carry the
    // partitions it lost, which would set them back for the new owner.
    first.stop().await;
    let committed = committed_offsets(&spec.group, &topic, PARTITIONS);
    assert!(
        committed
            .values()
            .all(|offset| *offset == PER_PARTITION * 2),
        "every partition stays committed at its end: {committed:?}"
    );
    assert_eq!(db.ledger_rows().await, total);
    assert_eq!(
        db.reserved("SKU-HOT").await,
        i64::from(HOT_PARTITIONS) * PER_PARTITION
    );
    assert_eq!(
        db.reserved("SKU-FREE").await,
        total - i64::from(HOT_PARTITIONS) * PER_PARTITION
    );
    second.stop().await;
}
