//! A steady-state batch costs at most two round trips to PostgreSQL
//! (docs/design.md#the-batch-transaction): the consumer's connection goes through a proxy that counts the
//! exchanges, and their number is divided by the batches committed meanwhile.

mod common;

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
    let per_batch = proxy
        .per_steady_batch(&consumer, &spec, &topic, PARTITIONS, warm_up, steady)
        .await;
    assert!(per_batch <= 2.0, "{per_batch:.2} round trips per batch");
    traffic.assert_applied_once(&db).await;
    consumer.stop().await;
}
