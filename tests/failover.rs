//! A failover to a replica that had not received the last commits, under
//! load, with the consumer running: a real PostgreSQL streaming standby
//! (asynchronous, `pg_basebackup -R`), cut off from its primary and its
//! replay paused, so that it lacks what the primary committed (and Kafka's
//! offsets already cover) after that; the primary is killed with -9, the
//! standby promoted, and the endpoint the consumer uses switched to it, as a
//! cluster endpoint's DNS would be. The consumer reconnects by itself, finds
//! the database behind its positions, reads those partitions again, and
//! every event is applied exactly once on the new primary.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::private_pg::PrivatePostgres;
use common::proxy::Endpoint;
use common::*;

const PARTITIONS: i32 = 4;
const SKUS: [&str; 6] = ["SKU-1", "SKU-2", "SKU-3", "SKU-4", "SKU-5", "SKU-6"];

fn address(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn committed_sum(group: &str, topic: &str) -> i64 {
    committed_offsets(group, topic, PARTITIONS)
        .values()
        .filter(|o| **o > 0)
        .sum()
}

#[tokio::test]
async fn a_failover_to_a_lagging_replica_under_load_loses_nothing() {
    require_services();
    let mut primary = PrivatePostgres::start();
    let primary_db = primary.test_db().await;
    let stock: Vec<(&str, i64)> = SKUS.iter().map(|sku| (*sku, 1_000_000)).collect();
    primary_db.seed_stock(&stock).await;
    let standby = primary.standby();
    let standby_db = standby.test_db().await;
    wait_until(
        Duration::from_secs(30),
        "the standby has the stock",
        || async { standby_db.stock().await.len() == SKUS.len() },
    )
    .await;

    let endpoint = Endpoint::start(address(primary.port())).await;
    let topic = fresh_topic(PARTITIONS).await;
    let mut spec = ConsumerSpec::new(&primary_db, &topic);
    spec.database_url = format!(
        "postgres://inventory:inventory@127.0.0.1:{}/inventory",
        endpoint.port
    );
    let consumer = spec.start();
    // 3,000 orders (and a duplicate after every 40th) at about 300/s.
    let traffic = Traffic::orders("FAILOVER", &SKUS, 3_000, 40, 9);
    let sending = traffic.produce_paced(producer(), &topic, 30, Duration::from_millis(100));

    wait_until(
        Duration::from_secs(60),
        "orders applied on the primary",
        || async { primary_db.ledger_rows().await >= 600 },
    )
    .await;
    // The standby stops receiving (and replaying) WAL: from here on it
    // lacks what the primary commits.
    standby.sql("ALTER SYSTEM SET primary_conninfo = ''");
    standby.sql("SELECT pg_reload_conf()");
    standby.sql("SELECT pg_wal_replay_pause()");
    let standby_rows = standby_db.ledger_rows().await;
    wait_until(
        Duration::from_secs(60),
        "Kafka ahead of the standby",
        || async { committed_sum(&spec.group, &topic) > standby_rows + 600 },
    )
    .await;

    primary.kill_nine();
    let committed_at_crash = committed_sum(&spec.group, &topic);
    standby.sql("SELECT pg_wal_replay_resume()");
    assert_eq!(standby.sql("SELECT pg_promote(true, 60)"), "t", "promoted");
    let promoted_rows = standby_db.ledger_rows().await;
    assert!(
        promoted_rows + 300 < committed_at_crash,
        "the promoted replica lacks commits Kafka's offsets cover: {promoted_rows} rows, {committed_at_crash} offsets committed"
    );
    endpoint.switch(address(standby.port()));

    sending.await.expect("producing");
    wait_for_ledger(&standby_db, traffic.unique_events, Duration::from_secs(120)).await;
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        traffic.records.len() as i64,
        Duration::from_secs(60),
    )
    .await;
    assert!(
        consumer
            .log_text()
            .contains("reading the partition again from the database's position"),
        "the consumer found the database behind its positions"
    );
    consumer.stop().await;
    traffic.assert_applied_once(&standby_db).await;
}
