//! SIGTERM drains: `/readyz` turns unready at once (draining), the batch in
//! hand is still applied and committed, and the process exits 0 once its
//! background tasks are done.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_draining_consumer_is_unready_and_still_finishes_its_batch() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;

    // The batch in hand waits behind a held stock row, so the drain lasts.
    let holder = db.hold_stock_row("SKU-1").await;
    let spec = ConsumerSpec::new(&db, &topic).env("DB_LOCK_TIMEOUT_MS", "200");
    let mut consumer = spec.start();
    let records: Vec<Outgoing> = (0..3)
        .map(|i| Outgoing::event(&order(&format!("DRAIN-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;
    wait_until(Duration::from_secs(30), "the batch retried", || async {
        consumer
            .metric("inbox_db_retries_total{reason=\"lock_not_available\"}")
            .await
            >= 1.0
    })
    .await;

    consumer.signal(libc::SIGTERM);
    wait_until(Duration::from_secs(5), "/readyz says draining", || async {
        matches!(consumer.get("/readyz").await,
                 Some((503, body)) if body.contains("draining=true"))
    })
    .await;
    assert_eq!(db.ledger_rows().await, 0, "the batch is still held");

    holder.rollback().await.expect("release the row");
    let status = consumer.wait(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        consumer.log_text()
    );
    assert_eq!(db.ledger_rows().await, 3, "the batch in hand was applied");
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        3,
        "and committed before the exit"
    );
}
