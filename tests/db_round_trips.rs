//! A steady-state batch costs at most two round trips to PostgreSQL
//! (docs/design.md#the-batch-transaction): the consumer's connection goes through a proxy that counts the
//! exchanges, and their number is divided by the batches committed meanwhile.

mod common;

use std::time::Duration;

use common::proxy::CountingProxy;
use common::*;

const PARTITIONS: i32 = 4;
const WARM_UP: usize = 200;
const STEADY: usize = 1_000;
const SKUS: [&str; 5] = ["SKU-1", "SKU-2", "SKU-3", "SKU-4", "SKU-5"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_state_batch_costs_at_most_two_round_trips() {
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&SKUS.map(|sku| (sku, 1_000_000_000))).await;
    let proxy = CountingProxy::start("127.0.0.1:5432".parse().expect("address")).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.database_url = db.app_url_via(proxy.port);
    let consumer = spec.start();

    let traffic = Traffic::orders("ORD", &SKUS, WARM_UP + STEADY, 1_000_000, 0);
    let (warm_up, steady) = traffic.records.split_at(WARM_UP);
    // Connections opened, statements prepared, the window read: not steady.
    produce(&producer(), &topic, warm_up).await;
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        WARM_UP as i64,
        Duration::from_secs(60),
    )
    .await;
    let batches = || async { consumer.metric("inbox_batch_size_count").await };
    let (trips_before, batches_before) = (proxy.round_trips(), batches().await);

    // Steady traffic: a few records every 20 ms, so batches stay small and
    // many, as at 1,400 events/s spread over the partitions.
    let producer = producer();
    for chunk in steady.chunks(10) {
        produce(&producer, &topic, chunk).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        (WARM_UP + STEADY) as i64,
        Duration::from_secs(60),
    )
    .await;
    let trips = proxy.round_trips() - trips_before;
    let committed = batches().await - batches_before;
    assert!(committed >= 20.0, "enough batches to measure: {committed}");
    let per_batch = trips as f64 / committed;
    eprintln!("{trips} round trips for {committed} batches: {per_batch:.2} per batch");
    assert!(
        per_batch <= 2.0,
        "{trips} round trips for {committed} batches: {per_batch:.2} per batch"
    );
    traffic.assert_applied_once(&db).await;
    consumer.stop().await;
}
