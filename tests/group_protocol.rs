//! Kafka 4's consumer group protocol (GROUP_PROTOCOL=consumer, KIP-848)
//! with static membership: a member killed with -9 and started again at once
//! under the same `group.instance.id` is refused by the broker until the old
//! session ends (UnreleasedInstanceId, fatal in librdkafka). The consumer
//! says so and exits non-zero, for its supervisor to start it again, rather
//! than spinning in a dead client; started again later, it goes on, and
//! nothing is lost or applied twice. And under the classic protocol, a
//! static member that is fenced joins again, but two processes sharing an
//! instance id do not fence each other forever. A cluster that does not
//! offer the protocol (Kafka 3.x) stops the start, naming it.

mod common;

use std::time::{Duration, Instant};

use common::private_kafka::PrivateKafka;
use common::*;

#[tokio::test]
async fn a_static_member_restarted_too_soon_exits_and_a_later_start_goes_on() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 10_000)]).await;
    let spec = ConsumerSpec::new(&db, &topic)
        .env("GROUP_PROTOCOL", "consumer")
        .env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", &unique("instance"));
    let batch = |from: usize, to: usize| -> Vec<Outgoing> {
        (from..to)
            .map(|i| Outgoing::event(&order(&format!("STATIC-{i}"), &[("SKU-1", 1)])))
            .collect()
    };
    let producer = producer();
    produce(&producer, &topic, &batch(0, 50)).await;
    let first = spec.start();
    wait_for_ledger(&db, 50, Duration::from_secs(60)).await;
    first.kill().await;

    // At once, under the same instance id: the broker still holds it.
    let mut too_soon = spec.start();
    let status = too_soon.wait(Duration::from_secs(30)).await;
    assert!(!status.success(), "exits non-zero");
    let log = too_soon.log_text();
    assert!(log.contains("failed fatally"), "{log}");
    assert!(log.contains("UnreleasedInstanceId"), "{log}");

    // Once the old session is over (the broker's 10 s), a start goes on.
    produce(&producer, &topic, &batch(50, 100)).await;
    let started = Instant::now();
    let running = loop {
        let mut member = spec.start();
        let exited = async {
            loop {
                if let Some(status) = member.child.try_wait().expect("try_wait") {
                    return Some(status);
                }
                if db.ledger_rows().await >= 100 {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        .await;
        match exited {
            None => break member,
            Some(status) => {
                assert!(!status.success());
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "still refused a minute after the kill"
                );
            }
        }
    };
    wait_for_ledger(&db, 100, Duration::from_secs(30)).await;
    wait_all_committed(&spec.group, &topic, 2, 100, Duration::from_secs(30)).await;
    running.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 100);
}

/// Two processes started with the same `group.instance.id` (a deployment
/// mistake) under the classic protocol: each join fences the other. A fenced
/// member joins again (as after a coordinator move), but not forever: after
/// repeated fences one of them stops with a line saying why, the other goes
/// on, and nothing is lost or applied twice.
#[tokio::test]
async fn twins_with_one_instance_id_end_with_one_stopping_and_nothing_doubled() {
    let topic = fresh_topic(2).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 10_000)]).await;
    let spec =
        ConsumerSpec::new(&db, &topic).env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", &unique("twin"));
    let batch = |from: usize, to: usize| -> Vec<Outgoing> {
        (from..to)
            .map(|i| Outgoing::event(&order(&format!("TWIN-{i}"), &[("SKU-1", 1)])))
            .collect()
    };
    let producer = producer();
    produce(&producer, &topic, &batch(0, 50)).await;
    let mut first = spec.start();
    wait_for_ledger(&db, 50, Duration::from_secs(60)).await;
    let mut second = spec.start();

    let deadline = Instant::now() + Duration::from_secs(120);
    let (stopped, mut survivor) = loop {
        if first.child.try_wait().expect("try_wait").is_some() {
            break (first, second);
        }
        if second.child.try_wait().expect("try_wait").is_some() {
            break (second, first);
        }
        assert!(
            Instant::now() < deadline,
            "neither twin stopped within 120 s; logs:\n{}\n---\n{}",
            first.log_text(),
            second.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let log = stopped.log_text();
    assert!(
        log.contains("joining the group again with a new consumer")
            && log.contains("another consumer runs with this group.instance.id"),
        "the stopped twin joined again, then said why it stops: {log}"
    );

    produce(&producer, &topic, &batch(50, 100)).await;
    wait_for_ledger(&db, 100, Duration::from_secs(60)).await;
    assert!(
        survivor.child.try_wait().expect("try_wait").is_none(),
        "the other twin goes on: {}",
        survivor.log_text()
    );
    assert_eq!(db.ledger_rows().await, 100);
    assert_eq!(db.reserved("SKU-1").await, 100, "each event applied once");
    survivor.stop().await;
}

/// A static member fenced while it retries a batch (behind a held stock row)
/// learns it from the poll of its retry loop: it joins again with a new
/// consumer instead of living on as a zombie, and once the twin that fenced
/// it is gone it applies what comes, exactly once.
#[tokio::test]
async fn a_member_fenced_while_it_retries_a_batch_joins_again() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 10_000)]).await;
    let spec =
        ConsumerSpec::new(&db, &topic).env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", &unique("fenced"));
    let held = db.hold_stock_row("SKU-1").await;
    let first = spec.start();
    let producer = producer();
    produce(
        &producer,
        &topic,
        &[Outgoing::event(&order("HELD", &[("SKU-1", 1)]))],
    )
    .await;
    wait_until(
        Duration::from_secs(60),
        "the first member retries",
        || async { first.metric_sum("inbox_db_retries_total").await >= 1.0 },
    )
    .await;

    let twin = spec.start();
    wait_until(
        Duration::from_secs(90),
        "the first member learns it was fenced and joins again",
        || async {
            first
                .log_text()
                .contains("joining the group again with a new consumer")
        },
    )
    .await;
    twin.stop().await;
    held.rollback().await.expect("free the row");

    let events: Vec<Outgoing> = (0..100)
        .map(|i| Outgoing::event(&order(&format!("AFTER-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer, &topic, &events).await;
    wait_for_ledger(&db, 101, Duration::from_secs(90)).await;
    assert_eq!(db.reserved("SKU-1").await, 101, "each event applied once");
    first.stop().await;
}

/// A cluster whose brokers do not offer the consumer protocol (Kafka 3.x
/// by default; here a broker configured for the classic one only):
/// GROUP_PROTOCOL=consumer stops the start with one line naming it, where
/// librdkafka alone would wait for a coordinator forever, saying nothing.
#[tokio::test]
async fn the_consumer_protocol_on_a_cluster_without_it_stops_the_start() {
    let kafka = PrivateKafka::start_with(&[("group.coordinator.rebalance.protocols", "classic")]);
    let topic = kafka.topic(1).await;
    let db = TestDb::new().await;
    let mut spec = ConsumerSpec::new(&db, &topic).env("GROUP_PROTOCOL", "consumer");
    spec.bootstrap = kafka.bootstrap();
    let mut consumer = spec.start();
    let status = consumer.wait(Duration::from_secs(60)).await;
    let log = consumer.log_text();
    assert!(!status.success(), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.contains("GROUP_PROTOCOL=consumer")
            && last.contains("does not offer the consumer group protocol")
            && last.contains("GROUP_PROTOCOL=classic"),
        "{log}"
    );
}
