//! Kafka 4's consumer group protocol (GROUP_PROTOCOL=consumer, KIP-848)
//! with static membership: a member killed with -9 and started again at once
//! under the same `group.instance.id` is refused by the broker until the old
//! session ends (UnreleasedInstanceId, fatal in librdkafka). The consumer
//! says so and exits non-zero, for its supervisor to start it again, rather
//! than spinning in a dead client; started again later, it goes on, and
//! nothing is lost or applied twice.

mod common;

use std::time::{Duration, Instant};

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
