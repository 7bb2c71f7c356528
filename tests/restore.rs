//! A database restored from a backup (or failed over to a replica that had
//! not received the last commits) is behind Kafka's committed offsets. The
//! database is the authority on positions (docs/design.md#positions): the consumer starts
//! each partition where the restored database says and applies again what
//! the restore took away, exactly once.

mod common;

use std::time::Duration;

use common::*;

const PARTITIONS: i32 = 3;
const SKUS: [&str; 6] = ["SKU-1", "SKU-2", "SKU-3", "SKU-4", "SKU-5", "SKU-6"];

/// A fresh topic and stocked database, and 3,000 orders (with an exact
/// duplicate after every 50th) cut into three parts of 1,000, 1,500 and 500
/// orders: the traffic and the record indexes of the two cuts.
async fn three_parts(prefix: &str) -> (String, TestDb, Traffic, usize, usize) {
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    let stock: Vec<(&str, i64)> = SKUS.iter().map(|sku| (*sku, 1_000_000)).collect();
    db.seed_stock(&stock).await;
    let traffic = Traffic::orders(prefix, &SKUS, 3_000, 50, 10);
    let cut = |orders: usize| orders + orders / 50;
    (topic, db, traffic, cut(1_000), cut(2_500))
}

/// Every event applied exactly once, and every partition's position at its
/// end.
async fn applied_once_and_positions_at_the_end(db: &TestDb, traffic: &Traffic) {
    traffic.assert_applied_once(db).await;
    let positions: i64 = db
        .count("SELECT coalesce(sum(next_offset), 0)::bigint FROM inbox_position")
        .await;
    assert_eq!(
        positions,
        traffic.records.len() as i64,
        "positions at the end of every partition"
    );
}

/// A consumer of the owner role (whose sessions the backup and the restore
/// may end) applies the records before `first`, a backup is taken, and it
/// applies those up to `second` too: the spec, the consumer still running,
/// and the backup.
async fn applied_across_a_backup(
    topic: &str,
    db: &TestDb,
    traffic: &Traffic,
    first: usize,
    second: usize,
) -> (ConsumerSpec, ConsumerProcess, String) {
    let mut spec = ConsumerSpec::new(db, topic);
    spec.database_url = db.url.clone();
    let producer = producer();
    let consumer = spec.start();
    produce(&producer, topic, &traffic.records[..first]).await;
    committed_through(&spec, first).await;
    let backup = db.snapshot().await;
    produce(&producer, topic, &traffic.records[first..second]).await;
    committed_through(&spec, second).await;
    (spec, consumer, backup)
}

/// Waits until the spec's group committed `records` over the partitions.
async fn committed_through(spec: &ConsumerSpec, records: usize) {
    wait_all_committed(
        &spec.group,
        &spec.topic,
        PARTITIONS,
        records as i64,
        Duration::from_secs(90),
    )
    .await;
}

#[tokio::test]
async fn a_database_restored_from_a_backup_reapplies_what_it_lost() {
    let (topic, db, traffic, first, second) = three_parts("RESTORE").await;
    let spec = ConsumerSpec::new(&db, &topic);
    let producer = producer();

    produce(&producer, &topic, &traffic.records[..first]).await;
    let consumer = spec.start();
    committed_through(&spec, first).await;
    consumer.stop().await;
    assert_eq!(db.ledger_rows().await, 1_000);
    let backup = db.snapshot().await;

    produce(&producer, &topic, &traffic.records[first..second]).await;
    let consumer = spec.start();
    committed_through(&spec, second).await;
    consumer.stop().await;
    assert_eq!(db.ledger_rows().await, 2_500);

    // The restore: the database forgets the last 1,500 orders, while
    // Kafka's committed offsets stay past them.
    db.restore(&backup).await;
    assert_eq!(db.ledger_rows().await, 1_000, "the restored ledger");
    let kafka_before: i64 = committed_offsets(&spec.group, &topic, PARTITIONS)
        .values()
        .sum();
    assert_eq!(
        kafka_before, second as i64,
        "Kafka is ahead of the database"
    );

    produce(&producer, &topic, &traffic.records[second..]).await;
    let consumer = spec.start();
    wait_for_ledger(&db, 3_000, Duration::from_secs(90)).await;
    committed_through(&spec, traffic.records.len()).await;
    assert!(
        consumer
            .log_text()
            .contains("start offsets of the assigned partitions"),
        "the consumer says where it starts"
    );
    assert_eq!(
        consumer.metric("inbox_processed_total").await,
        2_000.0,
        "the 1,500 orders the restore took away and the 500 new ones"
    );
    consumer.stop().await;
    applied_once_and_positions_at_the_end(&db, &traffic).await;
}

/// The same restore, under a consumer that keeps running: its connections
/// are cut, it connects to the restored database, whose positions are behind
/// the ones it wrote; the batch statement refuses to go on there, and the
/// consumer reads those partitions again from the database's positions.
#[tokio::test]
async fn a_database_restored_under_a_running_consumer_reapplies_what_it_lost() {
    let (topic, db, traffic, first, second) = three_parts("LIVE").await;
    let (spec, consumer, backup) =
        applied_across_a_backup(&topic, &db, &traffic, first, second).await;
    let producer = producer();
    assert_eq!(db.ledger_rows().await, 2_500);

    db.restore(&backup).await;
    assert_eq!(db.ledger_rows().await, 1_000, "the restored ledger");

    produce(&producer, &topic, &traffic.records[second..]).await;
    wait_for_ledger(&db, 3_000, Duration::from_secs(90)).await;
    committed_through(&spec, traffic.records.len()).await;
    assert!(
        consumer
            .log_text()
            .contains("reading the partition again from the database's position"),
        "the consumer says it reads again"
    );
    assert!(
        consumer
            .metric("inbox_db_retries_total{reason=\"position_behind\"}")
            .await
            >= 1.0
    );
    consumer.stop().await;
    applied_once_and_positions_at_the_end(&db, &traffic).await;
}

/// The same restore, under a consumer started after the last batch it would
/// lose and before the restore, that has written nothing since: the positions
/// it read at assignment are what the database must not go behind. Nothing
/// arrives after the restore at first: the consumer notices on its own
/// (it checks the positions of its partitions periodically), reads again,
/// and then applies what comes next.
#[tokio::test]
async fn a_database_restored_under_a_freshly_started_consumer_reapplies_what_it_lost() {
    let (topic, db, traffic, first, second) = three_parts("FRESH").await;
    let (spec, consumer, backup) =
        applied_across_a_backup(&topic, &db, &traffic, first, second).await;
    let producer = producer();
    consumer.stop().await;

    let consumer = spec.start();
    wait_until(Duration::from_secs(60), "partitions assigned", || async {
        consumer
            .log_text()
            .contains("start offsets of the assigned partitions")
    })
    .await;
    db.restore(&backup).await;
    assert_eq!(db.ledger_rows().await, 1_000, "the restored ledger");

    wait_for_ledger(&db, 2_500, Duration::from_secs(60)).await;
    produce(&producer, &topic, &traffic.records[second..]).await;
    wait_for_ledger(&db, 3_000, Duration::from_secs(90)).await;
    committed_through(&spec, traffic.records.len()).await;
    assert!(
        consumer
            .log_text()
            .contains("reading the partition again from the database's position"),
        "the consumer says it reads again"
    );
    consumer.stop().await;
    applied_once_and_positions_at_the_end(&db, &traffic).await;
}
