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
    let holder = db.hold_stock_row("SKU-1").await;

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

/// Maintenance's DROP of a partition past the window waits for no one past
/// DB_LOCK_TIMEOUT_MS: behind a session that reads the partition, it gives
/// up (and is tried again later) rather than queueing every batch's ledger
/// insert behind its exclusive lock.
#[tokio::test]
async fn maintenance_behind_a_held_partition_gives_up() {
    let db = TestDb::new().await;
    let oldest: String = sqlx::query_scalar(
        "SELECT 'processed_inbox_p' || to_char(min(d), 'YYYYMMDD') FROM inbox_window_days() AS d",
    )
    .fetch_one(&db.pool)
    .await
    .expect("the oldest partition");
    let mut holder = db.pool.begin().await.expect("begin");
    sqlx::query(&format!("LOCK TABLE {oldest} IN ACCESS SHARE MODE"))
        .execute(&mut *holder)
        .await
        .expect("hold the partition");

    // A window one day shorter: the oldest partition is to be dropped.
    db.set_retention_days(13).await;
    let maintain = || {
        tokio::process::Command::new(binary())
            .arg("maintain")
            .env("DATABASE_URL", &db.url)
            .env("INBOX_RETENTION_DAYS", "13")
            .env("DB_LOCK_TIMEOUT_MS", "300")
            .output()
    };
    let held = tokio::time::timeout(Duration::from_secs(20), maintain())
        .await
        .expect("maintenance gives up within its lock timeout, it does not wait")
        .expect("run maintain");
    let said = String::from_utf8_lossy(&held.stderr);
    assert!(!held.status.success(), "maintenance failed: {said}");
    assert!(said.contains("lock timeout"), "{said}");

    holder.rollback().await.expect("release the partition");
    let free = maintain().await.expect("run maintain");
    let said = String::from_utf8_lossy(&free.stdout);
    assert!(free.status.success(), "{said}");
    assert!(said.contains("dropped: 1"), "{said}");
}
