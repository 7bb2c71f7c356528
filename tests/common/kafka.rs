//! Topics of each test's own on the shared broker, records produced with
//! the service's own event type, and what the group committed.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use inventory_inbox::event::{OrderLine, OrderPlaced};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use uuid::Uuid;

use super::{kafka, require_services, unique};

/// A fresh topic with `partitions` partitions.
pub async fn fresh_topic(partitions: i32) -> String {
    fresh_topic_with(partitions, &[]).await
}

/// A fresh topic with topic-level configuration.
pub async fn fresh_topic_with(partitions: i32, config: &[(&str, &str)]) -> String {
    require_services();
    create_topic_at(kafka(), "orders_test", partitions, config).await
}

/// Creates a topic named `prefix` plus a unique suffix (replication 1) on
/// the given bootstrap servers; returns its name.
pub async fn create_topic_at(
    bootstrap: &str,
    prefix: &str,
    partitions: i32,
    config: &[(&str, &str)],
) -> String {
    create_topic_replicated(bootstrap, prefix, partitions, 1, config).await
}

/// A fresh topic with `replicas` copies of each partition.
pub async fn create_topic_replicated(
    bootstrap: &str,
    prefix: &str,
    partitions: i32,
    replicas: i32,
    config: &[(&str, &str)],
) -> String {
    let name = unique(prefix);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            &[config.iter().fold(
                NewTopic::new(&name, partitions, TopicReplication::Fixed(replicas)),
                |topic, (key, value)| topic.set(key, value),
            )],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create topic");
    for result in results {
        result.expect("topic created");
    }
    name
}

/// A producer for tests: idempotent, acks=all.
pub fn producer() -> FutureProducer {
    producer_at(kafka())
}

/// A producer for tests on the given bootstrap servers.
pub fn producer_at(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// One record to produce.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub key: String,
    pub payload: Vec<u8>,
    pub headers: Vec<(String, String)>,
    /// Partition to write to; None lets the key decide.
    pub partition: Option<i32>,
    /// The record's Kafka timestamp (ms since the epoch); None: the
    /// producer's clock.
    pub timestamp: Option<i64>,
}

impl Outgoing {
    pub fn event(event: &OrderPlaced) -> Outgoing {
        Outgoing {
            key: event.order_id.clone(),
            payload: event.to_json(),
            headers: vec![],
            partition: None,
            timestamp: None,
        }
    }

    pub fn raw(key: &str, payload: &[u8]) -> Outgoing {
        Outgoing {
            key: key.into(),
            payload: payload.to_vec(),
            headers: vec![],
            partition: None,
            timestamp: None,
        }
    }

    pub fn on_partition(mut self, partition: i32) -> Outgoing {
        self.partition = Some(partition);
        self
    }

    pub fn at_timestamp(mut self, millis: i64) -> Outgoing {
        self.timestamp = Some(millis);
        self
    }

    pub fn header(mut self, key: &str, value: &str) -> Outgoing {
        self.headers.push((key.into(), value.into()));
        self
    }
}

/// Produces records in order and waits until all are acknowledged.
pub async fn produce(producer: &FutureProducer, topic: &str, records: &[Outgoing]) {
    let mut deliveries = Vec::with_capacity(records.len());
    for record in records {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: Some(value),
            });
        }
        let mut message = FutureRecord::to(topic)
            .key(&record.key)
            .payload(&record.payload)
            .headers(headers);
        if let Some(partition) = record.partition {
            message = message.partition(partition);
        }
        if let Some(timestamp) = record.timestamp {
            message = message.timestamp(timestamp);
        }
        loop {
            match producer.send_result(message) {
                Ok(delivery) => {
                    deliveries.push(delivery);
                    break;
                }
                Err((_, returned)) => {
                    message = returned;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    for delivery in deliveries {
        delivery
            .await
            .expect("delivery future")
            .expect("record acknowledged");
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
}

/// An order with the given lines, placed now.
pub fn order(order_id: &str, lines: &[(&str, i32)]) -> OrderPlaced {
    order_at(order_id, lines, Utc::now())
}

pub fn order_at(order_id: &str, lines: &[(&str, i32)], occurred_at: DateTime<Utc>) -> OrderPlaced {
    OrderPlaced {
        message_id: Uuid::new_v4(),
        order_id: order_id.into(),
        occurred_at,
        lines: lines
            .iter()
            .map(|(sku, quantity)| OrderLine {
                sku: (*sku).into(),
                quantity: *quantity,
            })
            .collect(),
    }
}

/// Committed offsets of a group for a topic, per partition (-1001 = none).
pub fn committed_offsets(group: &str, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    committed_offsets_at(kafka(), group, topic, partitions)
}

/// Committed offsets of a group on the given bootstrap servers.
pub fn committed_offsets_at(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    for partition in 0..partitions {
        list.add_partition(topic, partition);
    }
    // The group's coordinator may be moving or still loading its offsets
    // (a fresh broker, a broker just restarted): those answers mean "ask
    // again", any other error fails the test.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let committed = loop {
        match consumer.committed_offsets(list.clone(), Duration::from_secs(10)) {
            Ok(committed) => break committed,
            Err(error) if coordinator_moving(&error) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("committed offsets: {error:?}"),
        }
    };
    committed
        .elements()
        .iter()
        .map(|e| {
            (
                e.partition(),
                match e.offset() {
                    Offset::Offset(o) => o,
                    _ => -1001,
                },
            )
        })
        .collect()
}

/// An error of the group coordinator that goes away once it has settled.
fn coordinator_moving(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as Code;
    matches!(
        error.rdkafka_error_code(),
        Some(
            Code::NotCoordinator | Code::CoordinatorLoadInProgress | Code::CoordinatorNotAvailable
        )
    )
}

/// Commits offsets for a group with no member running, as an operator's
/// `kafka-consumer-groups.sh --reset-offsets` does.
pub fn commit_offsets(group: &str, topic: &str, offsets: &[(i32, i64)]) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    for (partition, offset) in offsets {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .expect("offset");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match consumer.commit(&list, CommitMode::Sync) {
            Ok(()) => return,
            Err(error) if coordinator_moving(&error) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("offset commit: {error:?}"),
        }
    }
}

/// Deletes the records of `topic` before the given offset of each partition
/// (Kafka's DeleteRecords, as `kafka-delete-records.sh` does): the log start
/// moves there, as retention would have moved it.
pub fn delete_records_before(topic: &str, before: &[(i32, i64)]) {
    use rdkafka::bindings as rdsys;
    use rdkafka::producer::BaseProducer;
    use rdkafka::{Offset, TopicPartitionList};
    let client: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka())
        .create()
        .expect("admin client");
    let mut offsets = TopicPartitionList::new();
    for (partition, offset) in before {
        offsets
            .add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .expect("offset");
    }
    // SAFETY: every handle made here is destroyed here; librdkafka copies
    // the list, and the result event is read before it is destroyed.
    let (error, message) = unsafe {
        let rk = client.client().native_ptr();
        let queue = rdsys::rd_kafka_queue_new(rk);
        let mut request = rdsys::rd_kafka_DeleteRecords_new(offsets.ptr());
        rdsys::rd_kafka_DeleteRecords(rk, &mut request, 1, std::ptr::null(), queue);
        rdsys::rd_kafka_DeleteRecords_destroy(request);
        let event = rdsys::rd_kafka_queue_poll(queue, 30_000);
        assert!(!event.is_null(), "DeleteRecords: no answer within 30 s");
        let mut error = rdsys::rd_kafka_event_error(event);
        let mut message = String::new();
        if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            let result = rdsys::rd_kafka_event_DeleteRecords_result(event);
            let list = rdsys::rd_kafka_DeleteRecords_result_offsets(result);
            for i in 0..(*list).cnt as usize {
                let element = *(*list).elems.add(i);
                if element.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                    error = element.err;
                    message = format!("partition {}", element.partition);
                }
            }
        } else {
            message = std::ffi::CStr::from_ptr(rdsys::rd_kafka_event_error_string(event))
                .to_string_lossy()
                .into_owned();
        }
        rdsys::rd_kafka_event_destroy(event);
        rdsys::rd_kafka_queue_destroy(queue);
        (error, message)
    };
    assert_eq!(
        error,
        rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
        "DeleteRecords failed: {message}"
    );
}

/// The text of a record's header `name`, when it has one.
#[allow(dead_code)]
pub fn header_text<M: rdkafka::Message>(message: &M, name: &str) -> Option<String> {
    use rdkafka::message::Headers;
    message
        .headers()?
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}
