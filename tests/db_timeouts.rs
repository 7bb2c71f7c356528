//! The consumer's sessions carry a lock_timeout (DB_LOCK_TIMEOUT_MS): a batch
//! behind a session that holds a stock row does not wait forever; it is
//! rolled back, counted as `lock_not_available` and retried, and applied once
//! the lock is gone.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_batch_behind_a_held_lock_gives_up_and_is_retried() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;

    // Another session holds the stock row.
    let mut holder = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT * FROM inventory_stock WHERE sku = 'SKU-1' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .expect("lock the row");

    let spec = ConsumerSpec::new(&db, &topic).env("DB_LOCK_TIMEOUT_MS", "200");
    let consumer = spec.start();
    let records: Vec<Outgoing> = (0..10)
        .map(|i| Outgoing::event(&order(&format!("LOCK-{i}"), &[("SKU-1", 2)])))
        .collect();
    produce(&producer(), &topic, &records).await;
    wait_until(
        Duration::from_secs(30),
        "a lock timeout retried",
        || async {
            consumer
                .metric("inbox_db_retries_total{reason=\"lock_not_available\"}")
                .await
                >= 1.0
        },
    )
    .await;
    assert_eq!(
        db.ledger_rows().await,
        0,
        "nothing applied while the row is held"
    );
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        -1001,
        "nothing committed for a batch that did not commit"
    );

    holder.rollback().await.expect("release the row");
    wait_for_ledger(&db, 10, Duration::from_secs(30)).await;
    wait_committed(&spec, 10).await;
    assert_eq!(db.reserved("SKU-1").await, 20);
    consumer.stop().await;
}
