//! An offset commit that never reached Kafka (refused during a rebalance,
//! lost with the coordinator) is sent again, also when no later record on
//! that partition brings another commit: the partition does not stay
//! uncommitted, to be reread by the next owner. And a partition whose
//! records the database has all, while Kafka's committed offset is older,
//! gets the database's position committed though nothing is left to read.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_lost_offset_commit_is_sent_again_without_new_records() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;
    // One batch, then nothing more: no later commit could cover the first.
    let records: Vec<Outgoing> = (0..5)
        .map(|i| Outgoing::event(&order(&format!("ORD-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;

    let spec = ConsumerSpec::new(&db, &topic).env("INBOX_FAILPOINT", "drop_first_offset_commit");
    let consumer = spec.start();
    wait_for_ledger(&db, 5, Duration::from_secs(60)).await;
    wait_committed(&spec, 5).await;

    assert!(
        consumer
            .log_text()
            .contains("fail point drop_first_offset_commit"),
        "the first offset commit was dropped; log:\n{}",
        consumer.log_text()
    );
    assert_eq!(db.reserved("SKU-1").await, 5, "each event applied once");
    // One batch: its commit, the one dropped, is the only one there was, so
    // only the re-sending can have committed the offset.
    assert_eq!(consumer.metric("inbox_batch_size_count").await, 1.0);

    // Kafka's confirmation of the commit sent again reaches the consumer,
    // which then stops sending it: one more commit, not one every second.
    wait_until(
        Duration::from_secs(30),
        "the offset commit sent again is confirmed",
        || async { consumer.log_text().contains("offset commit confirmed") },
    )
    .await;
    let resends = |log: String| log.matches("not confirmed again").count();
    let before = resends(consumer.log_text());
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        resends(consumer.log_text()),
        before,
        "a confirmed offset commit is not sent again; log:\n{}",
        consumer.log_text()
    );
    consumer.stop().await;
}

#[tokio::test]
async fn kafka_gets_the_databases_position_with_nothing_left_to_read() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;
    let records: Vec<Outgoing> = (0..20)
        .map(|i| Outgoing::event(&order(&format!("ORD-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let first = spec.start();
    wait_committed(&spec, 20).await;
    first.stop().await;

    // Kafka's offset as a member that died between its database commit and
    // its offset commit leaves it: behind the database's position.
    commit_offsets(&spec.group, &topic, &[(0, 5)]);
    assert_eq!(committed_offsets(&spec.group, &topic, 1)[&0], 5);

    let second = spec.start();
    wait_committed(&spec, 20).await;
    assert!(
        second.log_text().contains("from_database=1"),
        "started at the database's position"
    );
    assert_eq!(
        second.metric("inbox_duplicate_ignored_total").await,
        0.0,
        "nothing was read again"
    );
    assert_eq!(db.reserved("SKU-1").await, 20, "each event applied once");
    second.stop().await;
}
