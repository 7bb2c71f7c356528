//! Two consumers share a group over 12 partitions; one of them leaves mid-run
//! (its partitions are revoked, committed and handed over): every event is
//! applied exactly once.

mod common;

use std::time::Duration;

use common::*;
use inventory_inbox::event::OrderPlaced;

#[tokio::test]
async fn a_consumer_leaving_mid_run_loses_and_doubles_nothing() {
    const PARTITIONS: i32 = 12;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000_000), ("SKU-2", 1_000_000_000)])
        .await;
    let events: Vec<OrderPlaced> = (0..6_000)
        .map(|i| {
            order(
                &format!("ORD-{i}"),
                &[(["SKU-1", "SKU-2"][i % 2], 1 + (i % 3) as i32)],
            )
        })
        .collect();
    let mut stream: Vec<Outgoing> = events.iter().map(Outgoing::event).collect();
    for i in (0..6_000).step_by(20) {
        stream.push(Outgoing::event(&events[i]));
    }
    let total = stream.len() as i64;

    let spec = ConsumerSpec::new(&db, &topic);
    let staying = spec.start();
    let leaving = spec.start();
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let producer = producer();
            for chunk in stream.chunks(300) {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    wait_until(
        Duration::from_secs(60),
        "both consumers applying",
        || async {
            staying.metric("inbox_processed_total").await > 0.0
                && leaving.metric("inbox_processed_total").await > 0.0
        },
    )
    .await;
    leaving.stop().await;
    producing.await.expect("producer task");

    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(db.ledger_rows().await, 6_000);
    let expected_sku1: i64 = (0..6_000)
        .filter(|i| i % 2 == 0)
        .map(|i| 1 + (i % 3) as i64)
        .sum();
    let expected_sku2: i64 = (0..6_000)
        .filter(|i| i % 2 == 1)
        .map(|i| 1 + (i % 3) as i64)
        .sum();
    assert_eq!(db.reserved("SKU-1").await, expected_sku1);
    assert_eq!(db.reserved("SKU-2").await, expected_sku2);
    assert_eq!(db.reservations().await.len(), 6_000);
    assert!(
        staying
            .metric("inbox_rebalances_total{kind=\"assign\"}")
            .await
            >= 2.0,
        "the staying consumer took over the leaver's partitions"
    );
    staying.stop().await;
}

#[tokio::test]
async fn a_rebalance_storm_loses_and_doubles_nothing() {
    const PARTITIONS: i32 = 12;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000_000)]).await;
    let events: Vec<OrderPlaced> = (0..8_000)
        .map(|i| order(&format!("ORD-{i}"), &[("SKU-1", 1 + i % 4)]))
        .collect();
    let mut stream: Vec<Outgoing> = events.iter().map(Outgoing::event).collect();
    for i in (0..8_000).step_by(10) {
        stream.push(Outgoing::event(&events[i]));
    }
    let total = stream.len() as i64;

    // Three members; one of them is stopped and replaced every second or so,
    // alternating graceful stops and kill -9, while the stream flows.
    let spec = ConsumerSpec::new(&db, &topic);
    let mut members = vec![spec.start(), spec.start(), spec.start()];
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let producer = producer();
            for chunk in stream.chunks(400) {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    for round in 0..8 {
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let leaving = members.remove(round % members.len());
        if round % 2 == 0 {
            leaving.stop().await;
        } else {
            leaving.kill().await;
        }
        members.push(spec.start());
    }
    producing.await.expect("producer task");
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;

    assert_eq!(db.ledger_rows().await, 8_000);
    let expected: i64 = (0..8_000).map(|i| 1 + (i % 4) as i64).sum();
    assert_eq!(db.reserved("SKU-1").await, expected);
    assert_eq!(db.reservations().await.len(), 8_000);
    for member in members {
        member.stop().await;
    }
}
