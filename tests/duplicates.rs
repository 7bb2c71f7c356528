//! A redelivered event is acknowledged and has no effect, wherever the
//! duplicate shows up: in the same batch, in a later batch, after a restart,
//! and after the processing day has changed.

mod common;

use common::*;

#[tokio::test]
async fn duplicate_in_the_same_batch_is_applied_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let event = order("ORD-SAME", &[("SKU-1", 4)]);
    // Produced before the consumer starts: one poll holds both copies.
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&event), Outgoing::event(&event)],
    )
    .await;

    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 2).await;

    assert_eq!(db.ledger_rows().await, 1);
    assert_eq!(db.reserved("SKU-1").await, 4);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 1.0);
    assert_eq!(
        consumer.metric("inbox_batch_size_count").await,
        1.0,
        "one batch"
    );
    consumer.stop().await;
}

#[tokio::test]
async fn duplicate_in_a_later_batch_is_applied_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let event = order("ORD-LATER", &[("SKU-1", 4)]);
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();

    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 2).await;

    assert_eq!(db.ledger_rows().await, 1);
    assert_eq!(db.reserved("SKU-1").await, 4);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 1.0);
    assert_eq!(consumer.metric("inbox_processed_total").await, 1.0);
    consumer.stop().await;
}

#[tokio::test]
async fn duplicate_after_a_restart_is_applied_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let event = order("ORD-RESTART", &[("SKU-1", 4)]);
    let spec = ConsumerSpec::new(&db, &topic);

    let first = spec.start();
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    first.stop().await;

    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    let second = spec.start();
    wait_committed(&spec, 2).await;

    assert_eq!(db.ledger_rows().await, 1);
    assert_eq!(db.reserved("SKU-1").await, 4);
    assert_eq!(second.metric("inbox_duplicate_ignored_total").await, 1.0);
    assert_eq!(second.metric("inbox_processed_total").await, 0.0);
    second.stop().await;
}

#[tokio::test]
async fn duplicate_after_the_processing_day_changed_is_applied_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let event = order("ORD-NEXTDAY", &[("SKU-1", 4)]);
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();

    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 1).await;
    // The first delivery was processed two days ago, as far as the ledger
    // knows: the key is the event's day, not the processing day.
    sqlx::query("UPDATE processed_inbox SET processed_at = processed_at - interval '2 days'")
        .execute(&db.pool)
        .await
        .unwrap();
    produce(&producer(), &topic, &[Outgoing::event(&event)]).await;
    wait_committed(&spec, 2).await;

    assert_eq!(db.ledger_rows().await, 1);
    assert_eq!(db.reserved("SKU-1").await, 4);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 1.0);
    consumer.stop().await;
}
