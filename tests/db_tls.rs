//! PostgreSQL over TLS: a database across a network is reached with
//! `sslmode=require` (or `verify-full` with `sslrootcert`). The private server
//! here accepts TLS only, with a certificate of its own.

mod common;

use std::time::Duration;

use common::private_pg::PrivatePostgres;
use common::*;

#[tokio::test]
async fn the_consumer_applies_events_over_tls_only() {
    let server = PrivatePostgres::start_tls();
    let db = server.test_db().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let topic = fresh_topic(1).await;
    let records: Vec<Outgoing> = (0..10)
        .map(|i| Outgoing::event(&order(&format!("TLS-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = format!("{}?sslmode=require", server.url());
    let consumer = spec.start();
    wait_for_ledger(&db, 10, Duration::from_secs(30)).await;
    assert_eq!(db.reserved("SKU-1").await, 10);
    let encrypted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE application_name = 'inventory-inbox' AND ssl",
    )
    .fetch_one(&db.pool)
    .await
    .expect("read pg_stat_ssl");
    assert!(encrypted >= 1, "the consumer's sessions use TLS");
    consumer.stop().await;
}
