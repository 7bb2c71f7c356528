//! Lag in seconds (`inbox_consumer_lag_seconds{partition}`): the age of the
//! oldest record a partition holds unapplied, what an operator compares
//! with the 45 ms budget. It grows while a partition's records cannot be
//! applied, is 0 for an owned partition with nothing waiting, and falls back
//! to 0 once the records are applied.

mod common;

use std::time::Duration;

use common::*;

const HELD: &str = "inbox_consumer_lag_seconds{partition=\"0\"}";
const IDLE: &str = "inbox_consumer_lag_seconds{partition=\"1\"}";

/// The value of a series, or None while it is not exposed yet (lag series
/// exist only for partitions this member owns, from its first statistics).
async fn exposed(consumer: &ConsumerProcess, series: &str) -> Option<f64> {
    series_value(&consumer.metrics_text().await, series)
}

#[tokio::test]
async fn lag_in_seconds_grows_while_records_wait_and_is_zero_once_applied() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;

    // Another session holds the stock row: partition 0's batch is rolled
    // back after the lock timeout and retried, its records held meanwhile.
    let holder = db.hold_stock_row("SKU-1").await;
    let spec = ConsumerSpec::new(&db, &topic).env("DB_LOCK_TIMEOUT_MS", "200");
    let consumer = spec.start();
    let records: Vec<Outgoing> = (0..5)
        .map(|i| Outgoing::event(&order(&format!("LAG-{i}"), &[("SKU-1", 1)])).on_partition(0))
        .collect();
    produce(&producer(), &topic, &records).await;

    wait_until(
        Duration::from_secs(30),
        "partition 0 lagging by more than 2 s",
        || async { exposed(&consumer, HELD).await.is_some_and(|s| s > 2.0) },
    )
    .await;
    let first = consumer.metric(HELD).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = consumer.metric(HELD).await;
    assert!(
        later > first,
        "the lag grows while the records wait: {first} s, then {later} s"
    );
    // An owned partition with nothing waiting lags by 0 s (from the first
    // statistics that say it is owned).
    wait_until(Duration::from_secs(10), "partition 1 at 0 s", || async {
        exposed(&consumer, IDLE).await == Some(0.0)
    })
    .await;
    assert_eq!(db.ledger_rows().await, 0, "nothing applied while held");

    holder.rollback().await.expect("release the row");
    wait_for_ledger(&db, 5, Duration::from_secs(30)).await;
    wait_until(
        Duration::from_secs(10),
        "partition 0's lag back to 0 s",
        || async { consumer.metric(HELD).await == 0.0 },
    )
    .await;
    consumer.stop().await;
}

/// A new group on a topic that never had a record has nothing committed,
/// and librdkafka reports no lag for it: the lag in records is still there
/// for every owned partition (0), so a fresh deployment's dashboard and an
/// absence alert work.
#[tokio::test]
async fn an_idle_topic_has_a_lag_in_records_of_zero() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    let consumer = ConsumerSpec::new(&db, &topic).start();
    wait_until(
        Duration::from_secs(30),
        "inbox_consumer_lag of both partitions",
        || async {
            let body = consumer.metrics_text().await;
            series_value(&body, r#"inbox_consumer_lag{partition="0"}"#) == Some(0.0)
                && series_value(&body, r#"inbox_consumer_lag{partition="1"}"#) == Some(0.0)
        },
    )
    .await;
    consumer.stop().await;
}
