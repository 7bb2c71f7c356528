//! A database that stops answering (packets swallowed, no reset: a network
//! partition, a frozen host) is noticed within the client-side deadline:
//! the batch is given up as a transient failure, counted and logged, the
//! consumer turns unready, and SIGTERM ends it in bounded time. Nothing is
//! committed that the database did not confirm, and nothing is lost.

mod common;

use std::time::{Duration, Instant};

use common::proxy::CountingProxy;
use common::*;

#[tokio::test]
async fn a_silent_database_is_noticed_and_shutdown_still_finishes() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let proxy = CountingProxy::start("127.0.0.1:5432".parse().expect("address")).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = db.app_url_via(proxy.port);
    let spec = spec.env("DB_STATEMENT_TIMEOUT_MS", "2000");
    let mut consumer = spec.start();
    wait_until(Duration::from_secs(30), "ready", || async {
        matches!(consumer.get("/readyz").await, Some((200, _)))
    })
    .await;
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&order("ORD-1", &[("SKU-1", 1)]))],
    )
    .await;
    wait_for_ledger(&db, 1, Duration::from_secs(30)).await;

    proxy.silence(true);
    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&order("ORD-2", &[("SKU-1", 1)]))],
    )
    .await;
    wait_until(
        Duration::from_secs(40),
        "the wait for the database counted and /readyz unready",
        || async {
            consumer
                .metric(r#"inbox_db_retries_total{reason="database_timeout"}"#)
                .await
                >= 1.0
                && matches!(consumer.get("/readyz").await, Some((503, _)))
        },
    )
    .await;
    assert!(
        consumer.log_text().contains("no answer from the database"),
        "{}",
        consumer.log_text()
    );

    let asked = Instant::now();
    consumer.signal(libc::SIGTERM);
    let status = consumer.wait(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}:\n{}", consumer.log_text());
    assert!(
        asked.elapsed() < Duration::from_secs(25),
        "stopped after {:?}",
        asked.elapsed()
    );
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        1,
        "only what the database confirmed is committed"
    );

    // The database answers again: a new consumer applies what was left.
    proxy.silence(false);
    let mut direct = spec.clone();
    direct.database_url = db.app_url.clone();
    let consumer = direct.start();
    wait_for_ledger(&db, 2, Duration::from_secs(30)).await;
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 2);
}

/// With nothing to consume, a database that stops answering is noticed all
/// the same (the consumer checks its partitions' positions every 10 s):
/// `/readyz` turns unready, and ready again once the database answers.
#[tokio::test]
async fn an_idle_consumer_turns_unready_while_the_database_does_not_answer() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    let proxy = CountingProxy::start("127.0.0.1:5432".parse().expect("address")).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = db.app_url_via(proxy.port);
    let consumer = spec.env("DB_STATEMENT_TIMEOUT_MS", "1000").start();
    let readyz = || async { consumer.get("/readyz").await.map(|(status, _)| status) };
    wait_until(Duration::from_secs(30), "ready", || async {
        readyz().await == Some(200)
    })
    .await;
    proxy.silence(true);
    wait_until(
        Duration::from_secs(40),
        "unready without a record",
        || async { readyz().await == Some(503) },
    )
    .await;
    proxy.silence(false);
    wait_until(Duration::from_secs(40), "ready again", || async {
        readyz().await == Some(200)
    })
    .await;
    consumer.stop().await;
}
