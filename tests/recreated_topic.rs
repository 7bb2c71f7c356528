//! A topic deleted and created again under the same name is another topic
//! (Kafka gives it another id): the database's positions of the old one are
//! never where the new one starts, or its first records would be skipped.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

/// Deletes the topic and creates it again with the same name (retrying
/// while the broker still finishes the deletion).
async fn recreate(topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .create()
        .expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin
        .delete_topics(&[topic], &options)
        .await
        .expect("delete topic")
    {
        result.expect("topic deleted");
    }
    wait_until(
        Duration::from_secs(60),
        "the topic created again",
        || async {
            let created = admin
                .create_topics(
                    &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
                    &options,
                )
                .await
                .expect("create topic");
            created.into_iter().all(|result| result.is_ok())
        },
    )
    .await;
}

fn events(prefix: &str, count: usize) -> Vec<Outgoing> {
    (0..count)
        .map(|i| Outgoing::event(&order(&format!("{prefix}-{i}"), &[("SKU-1", 1)])))
        .collect()
}

#[tokio::test]
async fn a_topic_created_again_is_read_from_its_start_not_from_the_old_position() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100_000)]).await;
    let spec = ConsumerSpec::new(&db, &topic);

    produce(&producer(), &topic, &events("OLD", 500)).await;
    let consumer = spec.start();
    wait_for_ledger(&db, 500, Duration::from_secs(60)).await;
    consumer.stop().await;

    recreate(&topic).await;
    produce(&producer(), &topic, &events("NEW", 600)).await;
    let consumer = spec.start();
    wait_for_ledger(&db, 1_100, Duration::from_secs(60)).await;
    wait_committed(&spec, 600).await;
    assert!(
        consumer
            .log_text()
            .contains("written for an earlier topic of this name"),
        "{}",
        consumer.log_text()
    );
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 1_100);
    let position: i64 = db.count("SELECT next_offset FROM inbox_position").await;
    assert_eq!(position, 600, "the new topic's position");
}

#[tokio::test]
async fn a_topic_created_again_under_a_running_consumer_loses_nothing() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100_000)]).await;
    let spec = ConsumerSpec::new(&db, &topic);

    let consumer = spec.start();
    produce(&producer(), &topic, &events("OLD", 500)).await;
    wait_for_ledger(&db, 500, Duration::from_secs(60)).await;

    recreate(&topic).await;
    produce(&producer(), &topic, &events("NEW", 600)).await;
    wait_for_ledger(&db, 1_100, Duration::from_secs(60)).await;
    consumer.stop().await;
    // Started again: where the database says, for the new topic.
    produce(&producer(), &topic, &events("LATER", 10)).await;
    let consumer = spec.start();
    wait_for_ledger(&db, 1_110, Duration::from_secs(60)).await;
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 1_110);
}
