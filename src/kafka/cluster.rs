//! Questions to the cluster outside the consumer group's life: whether the
//! topics exist, which group protocols the brokers offer, a topic's
//! retention and id, a partition's offsets, one record. Each makes a client
//! of its own, used once; none joins the group or commits.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::access::{self, AccessContext, Unanswered};
use super::KafkaSettings;

/// Of `topics`, those the cluster does not have (it does not create topics
/// on demand, or the consumer would wait for one forever, saying nothing).
/// A cluster that refuses this configuration says so at once
/// ([`ClusterError::Refused`]).
pub async fn missing_topics(
    settings: &KafkaSettings,
    topics: &[String],
) -> Result<Vec<String>, ClusterError> {
    use rdkafka::types::RDKafkaRespErr;
    let client: BaseConsumer<AccessContext> = settings
        .client_config()
        .create_with_context(AccessContext::new(settings))
        .map_err(|error| settings.scrub(error))?;
    let topics = topics.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut missing = Vec::new();
        for topic in topics {
            let metadata = access::metadata(&client, Some(&topic), Duration::from_secs(10))?;
            let unknown = metadata.topics().iter().any(|found| {
                matches!(
                    found.error(),
                    Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                ) || found.partitions().is_empty()
            });
            if unknown {
                missing.push(topic);
            }
        }
        Ok(missing)
    })
    .await
    .expect("the metadata query does not panic")
}

/// The group protocols a broker of the cluster offers, as its
/// `group.coordinator.rebalance.protocols` says (`classic`, `consumer`);
/// empty when the broker has no such setting (before Kafka 3.7, when no
/// broker had the consumer protocol). librdkafka itself only finds out in
/// its heartbeat, and then waits for a coordinator without end and without
/// a word above debug level.
pub async fn offered_group_protocols(settings: &KafkaSettings) -> KafkaResult<Vec<String>> {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = settings
        .client_config()
        .create()
        .map_err(|error| settings.scrub(error))?;
    let admin = std::sync::Arc::new(admin);
    let broker = {
        let admin = admin.clone();
        tokio::task::spawn_blocking(move || {
            let metadata = admin
                .inner()
                .fetch_metadata(None, Duration::from_secs(10))?;
            Ok::<_, KafkaError>(metadata.brokers().first().map(|b| b.id()))
        })
        .await
        .expect("the metadata query does not panic")?
    };
    let Some(broker) = broker else {
        return Err(KafkaError::MetadataFetch(
            rdkafka::types::RDKafkaErrorCode::BrokerNotAvailable,
        ));
    };
    let results = admin
        .describe_configs(
            &[ResourceSpecifier::Broker(broker)],
            &AdminOptions::new().request_timeout(Some(Duration::from_secs(10))),
        )
        .await?;
    let resource = results
        .into_iter()
        .next()
        .ok_or(KafkaError::AdminOpCreation(
            "no result for the broker's configuration".into(),
        ))?
        .map_err(KafkaError::AdminOp)?;
    Ok(resource
        .get("group.coordinator.rebalance.protocols")
        .and_then(|entry| entry.value.as_deref())
        .map(|value| {
            value
                .split(',')
                .map(|protocol| protocol.trim().to_ascii_lowercase())
                .filter(|protocol| !protocol.is_empty())
                .collect()
        })
        .unwrap_or_default())
}

/// The topic's `retention.ms` as the broker reports it; `None` for
/// unlimited (-1) or when the broker does not say.
pub async fn topic_retention(
    settings: &KafkaSettings,
    topic: &str,
) -> KafkaResult<Option<Duration>> {
    use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = settings
        .client_config()
        .create()
        .map_err(|error| settings.scrub(error))?;
    let results = admin
        .describe_configs(
            &[ResourceSpecifier::Topic(topic)],
            &AdminOptions::new().request_timeout(Some(Duration::from_secs(10))),
        )
        .await?;
    let retention_ms = results
        .into_iter()
        .filter_map(Result::ok)
        .find_map(|resource| {
            resource
                .get("retention.ms")
                .and_then(|entry| entry.value.as_deref()?.parse::<i64>().ok())
        });
    Ok(retention_ms
        .filter(|ms| *ms >= 0)
        .map(|ms| Duration::from_millis(ms as u64)))
}

/// The topic's id (Kafka's, from KIP-516: a topic deleted and created
/// again under the same name has another), or `None` when the broker does
/// not say within `timeout` (an old broker, or none reachable). Blocks.
pub fn topic_id<C: ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    timeout: Duration,
) -> Option<uuid::Uuid> {
    use rdkafka::bindings as rdsys;
    let name = std::ffi::CString::new(topic).ok()?;
    let mut names = [name.as_ptr()];
    let rk = client.native_ptr();
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: every object made here is destroyed here, after the last use
    // of what it owns (the description belongs to the event); the client
    // outlives the call.
    unsafe {
        let queue = rdsys::rd_kafka_queue_new(rk);
        let topics = rdsys::rd_kafka_TopicCollection_of_topic_names(names.as_mut_ptr(), 1);
        let options = rdsys::rd_kafka_AdminOptions_new(
            rk,
            rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS,
        );
        let mut errstr = [0 as std::os::raw::c_char; 256];
        rdsys::rd_kafka_AdminOptions_set_request_timeout(
            options,
            millis,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        rdsys::rd_kafka_DescribeTopics(rk, topics, options, queue);
        let event = rdsys::rd_kafka_queue_poll(queue, millis);
        let mut id = None;
        if !event.is_null()
            && rdsys::rd_kafka_event_error(event)
                == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            let result = rdsys::rd_kafka_event_DescribeTopics_result(event);
            let mut count = 0usize;
            let descriptions = if result.is_null() {
                std::ptr::null_mut()
            } else {
                rdsys::rd_kafka_DescribeTopics_result_topics(result, &mut count)
            };
            if !descriptions.is_null() && count == 1 {
                let description = *descriptions;
                let error = rdsys::rd_kafka_TopicDescription_error(description);
                let found = rdsys::rd_kafka_TopicDescription_topic_id(description);
                if (error.is_null()
                    || rdsys::rd_kafka_error_code(error)
                        == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
                    && !found.is_null()
                {
                    let high = rdsys::rd_kafka_Uuid_most_significant_bits(found) as u64;
                    let low = rdsys::rd_kafka_Uuid_least_significant_bits(found) as u64;
                    if high != 0 || low != 0 {
                        id = Some(uuid::Uuid::from_u64_pair(high, low));
                    }
                }
            }
        }
        if !event.is_null() {
            rdsys::rd_kafka_event_destroy(event);
        }
        rdsys::rd_kafka_AdminOptions_destroy(options);
        rdsys::rd_kafka_TopicCollection_destroy(topics);
        rdsys::rd_kafka_queue_destroy(queue);
        id
    }
}

/// Why `positions` or `inspect` got no answer from the cluster: a topic or
/// a partition it does not have is named (librdkafka says "Meta data fetch
/// error: UnknownPartition (Local: Unknown partition)"); anything else is
/// librdkafka's error, said once.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// `setting` names the topic: `KAFKA_TOPIC` or `DLQ_TOPIC`.
    #[error("{setting} {topic:?} does not exist on the cluster: create it (the broker does not create topics on demand)")]
    NoTopic {
        setting: &'static str,
        topic: String,
    },
    #[error("KAFKA_TOPIC {topic:?} has no partition {partition} (its partitions: 0 to {})", .partitions.saturating_sub(1))]
    NoPartition {
        topic: String,
        partition: i32,
        partitions: usize,
    },
    /// The cluster refuses this configuration (a login, a certificate,
    /// the security protocol): one line naming the setting to fix.
    #[error("{0}")]
    Refused(String),
    /// Not a source: its message is librdkafka's, which an error chain
    /// would repeat.
    #[error("kafka: {0}")]
    Kafka(KafkaError),
}

impl From<KafkaError> for ClusterError {
    fn from(error: KafkaError) -> Self {
        ClusterError::Kafka(error)
    }
}

impl From<Unanswered> for ClusterError {
    fn from(unanswered: Unanswered) -> Self {
        match unanswered {
            Unanswered::Refused(line) => ClusterError::Refused(line),
            Unanswered::Kafka(error) => ClusterError::Kafka(error),
        }
    }
}

/// The partitions of `topic` (of KAFKA_TOPIC), or that it does not exist,
/// or that the cluster refuses this configuration. Blocks.
fn partitions_of(
    client: &BaseConsumer<AccessContext>,
    topic: &str,
    timeout: Duration,
) -> Result<Vec<i32>, ClusterError> {
    use rdkafka::types::RDKafkaRespErr;
    let metadata = access::metadata(client, Some(topic), timeout)?;
    let mut partitions = Vec::new();
    for found in metadata.topics() {
        match found.error() {
            Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) | None
                if found.partitions().is_empty() =>
            {
                return Err(ClusterError::NoTopic {
                    setting: "KAFKA_TOPIC",
                    topic: topic.to_owned(),
                })
            }
            Some(error) => return Err(KafkaError::MetadataFetch(error.into()).into()),
            None => partitions.extend(found.partitions().iter().map(|p| p.id())),
        }
    }
    partitions.sort_unstable();
    Ok(partitions)
}

/// The group's committed offsets of `list`, asked again while the group's
/// coordinator is being elected or loaded (a group new to the cluster, a
/// broker restarted): librdkafka gives up on the first answer.
fn committed_offsets(
    consumer: &BaseConsumer<AccessContext>,
    list: TopicPartitionList,
    timeout: Duration,
) -> Result<TopicPartitionList, KafkaError> {
    use rdkafka::types::RDKafkaErrorCode;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match consumer.committed_offsets(list.clone(), timeout) {
            Err(KafkaError::MetadataFetch(
                RDKafkaErrorCode::NotCoordinator
                | RDKafkaErrorCode::CoordinatorLoadInProgress
                | RDKafkaErrorCode::CoordinatorNotAvailable,
            )) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            result => return result,
        }
    }
}

/// A partition as Kafka sees it, for `positions list` and `positions set`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionOffsets {
    pub partition: i32,
    /// The log start: the earliest offset still held.
    pub earliest: i64,
    /// The high watermark: the offset the next record will get.
    pub end: i64,
    /// The group's committed offset, if any.
    pub committed: Option<i64>,
}

/// The topic's partitions with their offsets and the group's commits (a
/// client of the group that never joins it: nothing is consumed).
pub async fn kafka_offsets(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
) -> Result<Vec<PartitionOffsets>, ClusterError> {
    offsets_with(Arc::new(look_up_client(settings, group)?), topic).await
}

/// A client of the cluster for look-ups: of the group, it never joins it
/// nor commits. One kept across look-ups (the console's) keeps its
/// connections, the topic's metadata and the group's coordinator, which a
/// new client finds again each time (a second, at times: the coordinator
/// is asked again on a timer).
pub type LookUpClient = BaseConsumer<AccessContext>;

/// A new [`LookUpClient`] of `group`.
pub fn look_up_client(settings: &KafkaSettings, group: &str) -> Result<LookUpClient, ClusterError> {
    Ok(settings
        .consumer_config(group)
        .create_with_context(AccessContext::new(settings))?)
}

/// [`kafka_offsets`] through `client`.
pub async fn offsets_with(
    client: Arc<LookUpClient>,
    topic: &str,
) -> Result<Vec<PartitionOffsets>, ClusterError> {
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let timeout = Duration::from_secs(10);
        let consumer: &LookUpClient = &client;
        let mut list = TopicPartitionList::new();
        for partition in partitions_of(consumer, &topic, timeout)? {
            list.add_partition(&topic, partition);
        }
        let committed = committed_offsets(consumer, list.clone(), timeout)?;
        let mut offsets = Vec::new();
        for element in list.elements() {
            let (earliest, end) =
                consumer.fetch_watermarks(&topic, element.partition(), timeout)?;
            let committed = committed
                .find_partition(&topic, element.partition())
                .and_then(|e| match e.offset() {
                    Offset::Offset(offset) => Some(offset),
                    _ => None,
                });
            offsets.push(PartitionOffsets {
                partition: element.partition(),
                earliest,
                end,
                committed,
            });
        }
        offsets.sort_by_key(|o| o.partition);
        Ok(offsets)
    })
    .await
    .expect("the Kafka query does not panic")
}

/// The record at `offset` of a partition, if the topic still holds it (a
/// client of the group that never joins it or commits: nothing moves).
pub async fn read_record(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<crate::batch::InboundRecord>, ClusterError> {
    let config = settings.consumer_config(group);
    let context = AccessContext::new(settings);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let timeout = Duration::from_secs(10);
        let consumer: BaseConsumer<AccessContext> = config.create_with_context(context)?;
        let partitions = partitions_of(&consumer, &topic, timeout)?;
        if !partitions.contains(&partition) {
            return Err(ClusterError::NoPartition {
                topic,
                partition,
                partitions: partitions.len(),
            });
        }
        let (earliest, end) = consumer.fetch_watermarks(&topic, partition, timeout)?;
        if offset < earliest || offset >= end {
            return Ok(None);
        }
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&topic, partition, Offset::Offset(offset))?;
        consumer.assign(&list)?;
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(500)) {
                Some(Ok(message)) if rdkafka::Message::offset(&message) == offset => {
                    return Ok(Some(super::to_record(&message)));
                }
                // A compacted or transactional gap: the offset holds none.
                Some(Ok(_)) => return Ok(None),
                Some(Err(error)) => return Err(error.into()),
                None => {}
            }
        }
        Err(
            KafkaError::MessageConsumption(rdkafka::types::RDKafkaErrorCode::OperationTimedOut)
                .into(),
        )
    })
    .await
    .expect("the Kafka read does not panic")
}

/// The Kafka timestamp (milliseconds since the epoch) of the first record
/// at or after each `(partition, offset)` of `from`: the oldest record not
/// yet applied when the offset is the next one to read. Read by a client
/// of the group that never joins it or commits; each partition is paused
/// once its record came. A partition whose record did not come within
/// `within` (or that holds none from there) is left out.
pub async fn first_timestamps(
    settings: &KafkaSettings,
    group: &str,
    topic: &str,
    from: Vec<(i32, i64)>,
    within: Duration,
) -> Result<Vec<(i32, i64)>, ClusterError> {
    let config = settings.consumer_config(group);
    let context = AccessContext::new(settings);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        if from.is_empty() {
            return Ok(found);
        }
        let consumer: BaseConsumer<AccessContext> = config.create_with_context(context)?;
        let mut list = TopicPartitionList::new();
        for (partition, offset) in &from {
            list.add_partition_offset(&topic, *partition, Offset::Offset(*offset))?;
        }
        consumer.assign(&list)?;
        let deadline = std::time::Instant::now() + within;
        while found.len() < from.len() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match consumer.poll(left.min(Duration::from_millis(200))) {
                Some(Ok(message)) => {
                    let partition = rdkafka::Message::partition(&message);
                    if found.iter().any(|(p, _)| *p == partition) {
                        continue;
                    }
                    if let Some(at) = rdkafka::Message::timestamp(&message).to_millis() {
                        found.push((partition, at));
                    }
                    let mut done = TopicPartitionList::new();
                    done.add_partition(&topic, partition);
                    consumer.pause(&done)?;
                }
                Some(Err(error)) => return Err(error.into()),
                None => {}
            }
        }
        found.sort_unstable();
        Ok(found)
    })
    .await
    .expect("the Kafka read does not panic")
}

/// A member of the consumer group, as the group coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupMember {
    pub member_id: String,
    pub client_id: String,
    pub host: String,
}

/// The group's state (`Stable`, `Empty`, …) and its members, as the
/// coordinator describes it, through `client` (of the group, it never joins
/// it).
pub async fn members_with(
    client: Arc<LookUpClient>,
    group: &str,
) -> Result<(String, Vec<GroupMember>), ClusterError> {
    let group = group.to_owned();
    tokio::task::spawn_blocking(move || {
        let list = client.fetch_group_list(Some(&group), Duration::from_secs(10))?;
        let Some(described) = list.groups().iter().find(|g| g.name() == group) else {
            return Ok(("Dead".to_owned(), Vec::new()));
        };
        let members = described
            .members()
            .iter()
            .map(|m| GroupMember {
                member_id: m.id().to_owned(),
                client_id: m.client_id().to_owned(),
                host: m.client_host().to_owned(),
            })
            .collect();
        Ok((described.state().to_owned(), members))
    })
    .await
    .expect("the Kafka query does not panic")
}
