//! The real services answer: a record makes the round trip through Kafka and
//! a row through PostgreSQL, each in this test's own topic and database.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::Message;

#[tokio::test]
async fn record_and_row_make_the_round_trip_through_real_services() {
    let topic = fresh_topic(3).await;
    let db = TestDb::new().await;
    let event = order("ORD-RT-1", &[("SKU-RT", 2)]);

    produce(
        &producer(),
        &topic,
        &[Outgoing::event(&event).on_partition(1)],
    )
    .await;
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .set("group.id", unique("round_trip"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record within 30 s")
        .expect("no Kafka error");
    assert_eq!(message.partition(), 1);
    assert_eq!(message.key(), Some(event.order_id.as_bytes()));
    assert_eq!(message.payload(), Some(event.to_json().as_slice()));

    db.seed_stock(&[("SKU-RT", 7)]).await;
    assert_eq!(db.stock().await["SKU-RT"], (7, 0));
    // The migrations created the dedup window around the database's today.
    let partitions = db
        .count("SELECT count(*) FROM pg_inherits WHERE inhparent = 'processed_inbox'::regclass")
        .await;
    assert_eq!(partitions, 17, "[today-14, today+2]");
}
