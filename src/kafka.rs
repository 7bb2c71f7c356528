//! The Kafka side: client configuration, the consumer context (rebalances,
//! offset commits, lag), and the DLQ producer.
//!
//! Invariant: an offset reaches Kafka only after the database transaction of
//! the batch containing the record before it committed. The pipeline records
//! those offsets in [`CommittedOffsets`] right after the DB commit; the
//! context commits them synchronously when partitions are revoked, before
//! librdkafka releases them (cooperative-sticky assignment), and forgets
//! them, so a partition's new owner starts exactly where the database is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol,
};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Header as KafkaHeader, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use crate::batch::{InboundRecord, PartitionKey};
use crate::event::Header;
use crate::metrics::Metrics;
use crate::parked::ParkedRow;
use crate::positions::PositionSource;

/// Where the cluster is and how to talk to it.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    pub group_protocol: crate::config::GroupProtocol,
    /// Extra librdkafka properties (TLS, SASL...). Values may be secrets:
    /// never log them.
    pub properties: Vec<(String, String)>,
}

/// Shortest property value taken out of error text whatever its key: a
/// shorter one (`1`, `all`, `PLAIN`) is no secret, and taking it out would
/// garble the words around it.
const SCRUBBED_FROM_LENGTH: usize = 8;

/// Property keys whose values are secrets at any length.
const SECRET_PROPERTY_MARKERS: [&str; 5] = ["password", "secret", "token", "jaas", "key"];

impl KafkaSettings {
    /// A librdkafka error without the values of the operator's properties:
    /// its text may quote them (an invalid value, a mandatory property), and
    /// they may be secrets. Every error of a client's creation goes through
    /// here before it is logged or returned.
    pub fn scrub(&self, error: KafkaError) -> KafkaError {
        match error {
            KafkaError::ClientConfig(result, description, key, _value) => KafkaError::ClientConfig(
                result,
                self.scrub_text(&description),
                key,
                "(value not shown)".into(),
            ),
            KafkaError::ClientCreation(text) => KafkaError::ClientCreation(self.scrub_text(&text)),
            other => other,
        }
    }

    /// `text` with every property value that could be a secret replaced.
    pub fn scrub_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (key, value) in &self.properties {
            let secret = SECRET_PROPERTY_MARKERS
                .iter()
                .any(|marker| key.contains(marker));
            if !value.is_empty() && (secret || value.len() >= SCRUBBED_FROM_LENGTH) {
                text = text.replace(value.as_str(), "[redacted]");
            }
        }
        text
    }

    /// The common configuration of every client of the service.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// The consumer: explicit offset commits only, cooperative rebalancing,
    /// earliest reset (an inventory consumer must never skip events; the
    /// ledger makes rereading safe), lag statistics every few seconds.
    pub fn consumer_config(&self, group_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("statistics.interval.ms", "5000")
            .set("fetch.wait.max.ms", "100")
            // A fetch brings at most about 100 records of each partition, so
            // a backlog reaches the consumer interleaved across partitions
            // and a round can apply several of them concurrently (lanes),
            // rather than one partition's megabyte at a time.
            .set("max.partition.fetch.bytes", "32768");
        match self.group_protocol {
            // Incremental rebalances: a member keeps its partitions while
            // others join or leave.
            crate::config::GroupProtocol::Classic => {
                config.set("partition.assignment.strategy", "cooperative-sticky")
            }
            // The broker assigns, incrementally too.
            crate::config::GroupProtocol::Consumer => config.set("group.protocol", "consumer"),
        };
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        // Properties given by the operator must not undo the guarantee.
        config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        config
    }
}

/// Offsets whose batches are committed in the database, per partition: the
/// next offset to consume. Shared by the pipeline (which raises them after
/// each DB commit) and the rebalance callback (which commits them on revoke).
///
/// Only partitions this member owns are tracked: a batch of a partition
/// revoked while other lanes were still applying is committed in the
/// database (the ledger and the position guard it), but its offset is never
/// sent to Kafka afterwards, where it would overwrite the new owner's.
#[derive(Debug, Default)]
pub struct CommittedOffsets {
    /// The partitions assigned to this member now.
    assigned: Mutex<BTreeSet<PartitionKey>>,
    next: Mutex<BTreeMap<PartitionKey, i64>>,
    /// What Kafka confirmed it holds, per partition. A commit can fail (the
    /// group rebalancing, the coordinator moving) with no later batch on
    /// that partition to carry the offset: [`CommittedOffsets::unconfirmed`]
    /// tells the pipeline what to send again.
    confirmed: Mutex<BTreeMap<PartitionKey, i64>>,
    /// Partitions revoked since the pipeline last looked: records of these
    /// still held in memory must be dropped (their new owner rereads them).
    revoked: Mutex<Vec<PartitionKey>>,
}

impl CommittedOffsets {
    /// Records offsets after a DB commit, for the partitions still
    /// assigned; never moves an offset backwards. Returns the offsets to
    /// commit: those of the partitions still owned.
    pub fn advance(&self, offsets: &BTreeMap<PartitionKey, i64>) -> BTreeMap<PartitionKey, i64> {
        let assigned = self.assigned.lock().expect("assigned lock");
        let mut next = self.next.lock().expect("offsets lock");
        let mut owned = BTreeMap::new();
        for (key, offset) in offsets {
            if !assigned.contains(key) {
                continue;
            }
            let entry = next.entry(key.clone()).or_insert(*offset);
            *entry = (*entry).max(*offset);
            owned.insert(key.clone(), *offset);
        }
        owned
    }

    /// The database went back for a partition this member reads again from
    /// `position` (`None`: from its beginning): the offset to commit goes back
    /// with it, and is sent to Kafka again.
    pub fn rewind(&self, key: &PartitionKey, position: Option<i64>) {
        // A partition revoked meanwhile is its new owner's to commit.
        if !self.assigned.lock().expect("assigned lock").contains(key) {
            return;
        }
        let mut next = self.next.lock().expect("offsets lock");
        match position {
            Some(position) => next.insert(key.clone(), position),
            None => next.remove(key),
        };
        self.confirmed.lock().expect("confirmed lock").remove(key);
    }

    /// Partitions newly assigned to this member.
    pub fn assign(&self, partitions: &TopicPartitionList) {
        let mut assigned = self.assigned.lock().expect("assigned lock");
        for element in partitions.elements() {
            assigned.insert((element.topic().to_owned(), element.partition()));
        }
    }

    /// Newly assigned partitions start at the database's positions: those
    /// are the offsets to commit until a batch moves them, sent with the
    /// unconfirmed ones (Kafka may hold an older offset, left by a member
    /// that died between its database commit and its offset commit).
    pub fn started_at(&self, starts: &BTreeMap<PartitionKey, i64>) {
        let assigned = self.assigned.lock().expect("assigned lock");
        let mut next = self.next.lock().expect("offsets lock");
        let mut confirmed = self.confirmed.lock().expect("confirmed lock");
        for (key, offset) in starts {
            if assigned.contains(key) {
                next.insert(key.clone(), *offset);
                confirmed.remove(key);
            }
        }
    }

    /// The next offset of a partition the database holds (from its last
    /// batch, or its position at assignment), when this member tracks it.
    pub fn next_of(&self, key: &PartitionKey) -> Option<i64> {
        self.next.lock().expect("offsets lock").get(key).copied()
    }

    /// The partitions assigned to this member now.
    pub fn owned(&self) -> Vec<PartitionKey> {
        let assigned = self.assigned.lock().expect("assigned lock");
        assigned.iter().cloned().collect()
    }

    /// Every tracked offset, as a list to commit.
    pub fn all(&self) -> TopicPartitionList {
        to_list(self.next.lock().expect("offsets lock").iter())
    }

    /// Records what a successful commit made Kafka hold.
    pub fn confirm(&self, committed: &TopicPartitionList) {
        let mut confirmed = self.confirmed.lock().expect("confirmed lock");
        for element in committed.elements() {
            if let (Ok(()), Offset::Offset(offset)) = (element.error(), element.offset()) {
                let key = (element.topic().to_owned(), element.partition());
                let entry = confirmed.entry(key).or_insert(offset);
                *entry = (*entry).max(offset);
            }
        }
    }

    /// Offsets the database holds that Kafka has not confirmed yet.
    pub fn unconfirmed(&self) -> TopicPartitionList {
        let next = self.next.lock().expect("offsets lock");
        let confirmed = self.confirmed.lock().expect("confirmed lock");
        to_list(
            next.iter()
                .filter(|(key, offset)| confirmed.get(*key).is_none_or(|c| c < *offset)),
        )
    }

    /// Partitions revoked since the last call.
    pub fn take_revoked(&self) -> Vec<PartitionKey> {
        std::mem::take(&mut *self.revoked.lock().expect("revoked lock"))
    }

    /// Forgets the revoked partitions, and returns their offsets (to commit
    /// before they are released).
    fn release(&self, revoked: &TopicPartitionList) -> TopicPartitionList {
        let mut assigned = self.assigned.lock().expect("assigned lock");
        let mut next = self.next.lock().expect("offsets lock");
        let mut confirmed = self.confirmed.lock().expect("confirmed lock");
        let mut released = BTreeMap::new();
        let mut gone = self.revoked.lock().expect("revoked lock");
        for element in revoked.elements() {
            let key = (element.topic().to_owned(), element.partition());
            assigned.remove(&key);
            if let Some(offset) = next.remove(&key) {
                released.insert(key.clone(), offset);
            }
            confirmed.remove(&key);
            gone.push(key);
        }
        to_list(released.iter())
    }
}

/// A topic-partition list of offsets.
pub fn to_list<'a>(
    offsets: impl Iterator<Item = (&'a PartitionKey, &'a i64)>,
) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in offsets {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .expect("a non-negative offset is valid");
    }
    list
}

/// The consumer's context: librdkafka calls it from inside `recv`.
pub struct InboxContext {
    pub offsets: std::sync::Arc<CommittedOffsets>,
    pub metrics: Metrics,
    /// Where assigned partitions start: the database's positions. `None`
    /// leaves it to Kafka's committed offsets (clients other than `run`).
    pub positions: Option<PositionSource>,
}

impl ClientContext for InboxContext {
    /// Lag per partition: the broker's high watermark minus the committed
    /// offset, as librdkafka's statistics report it, for the partitions this
    /// member owns. librdkafka keeps reporting a revoked partition with its
    /// last, frozen figures; exported, they would count the partition twice
    /// in the group's lag (once per member that ever owned it).
    fn stats(&self, statistics: Statistics) {
        for topic in statistics.topics.values() {
            for partition in topic.partitions.values() {
                if partition.partition < 0 {
                    continue;
                }
                let label = partition.partition.to_string();
                let key = (topic.topic.clone(), partition.partition);
                match lag_of(partition, self.offsets.next_of(&key)) {
                    Some(lag) if partition.desired => {
                        self.metrics
                            .consumer_lag
                            .with_label_values(&[&label])
                            .set(lag);
                    }
                    _ => {
                        let _ = self.metrics.consumer_lag.remove_label_values(&[&label]);
                    }
                }
            }
        }
    }
}

impl ConsumerContext for InboxContext {
    /// As rust-rdkafka's own, with one step more: before newly assigned
    /// partitions are handed to librdkafka, their start offsets are set to
    /// the database's positions (docs/design.md#positions).
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        error: RDKafkaRespErr,
        partitions: &mut TopicPartitionList,
    ) {
        // Asked before the partitions are handed back, while librdkafka's
        // group handler still waits for them (see `post_rebalance`).
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        match error {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let started = match &self.positions {
                    Some(source) => source.start_at_positions(consumer, partitions, &self.metrics),
                    None => Some(BTreeMap::new()),
                };
                self.pre_rebalance(consumer, &Rebalance::Assign(partitions));
                if let Some(started) = &started {
                    self.offsets.started_at(started);
                }
                let assigned = if cooperative {
                    consumer.incremental_assign(partitions)
                } else {
                    consumer.assign(partitions)
                };
                if let Err(error) = assigned {
                    tracing::error!(%error, "assigning partitions failed");
                }
                if started.is_none() {
                    // Shutting down before the database said where to start:
                    // read nothing of these partitions, commit nothing for them.
                    let _ = consumer.pause(partitions);
                    self.offsets.release(partitions);
                }
                self.post_rebalance(consumer, &Rebalance::Assign(partitions));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.pre_rebalance(consumer, &Rebalance::Revoke(partitions));
                unassign(consumer, partitions, cooperative);
                self.post_rebalance(consumer, &Rebalance::Revoke(partitions));
            }
            other => {
                let rebalance = Rebalance::Error(KafkaError::Rebalance(other.into()));
                self.pre_rebalance(consumer, &rebalance);
                unassign(consumer, partitions, cooperative);
                self.post_rebalance(consumer, &rebalance);
            }
        }
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(partitions) => {
                self.metrics.rebalances.with_label_values(&["revoke"]).inc();
                // Nothing is in flight here: batches run between polls, and
                // records polled but not yet committed are dropped by the
                // pipeline (see `take_revoked`). Commit what the database has,
                // synchronously, before the partitions are released.
                let offsets = self.offsets.release(partitions);
                if offsets.count() > 0 {
                    if let Err(error) = consumer.commit(&offsets, CommitMode::Sync) {
                        self.metrics.offset_commit_failures.inc();
                        tracing::warn!(%error, "offset commit on revoke failed; the new owner rereads (duplicates are ignored)");
                    }
                }
                tracing::info!(
                    count = partitions.count(),
                    partitions = %partition_numbers(partitions),
                    "partitions revoked"
                );
            }
            Rebalance::Assign(partitions) => {
                self.metrics.rebalances.with_label_values(&["assign"]).inc();
                self.offsets.assign(partitions);
                tracing::info!(
                    count = partitions.count(),
                    partitions = %partition_numbers(partitions),
                    "partitions assigned"
                );
            }
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance error"),
        }
    }

    /// The partitions owned now come from this context's own bookkeeping,
    /// not from librdkafka: after the last revoke of a closing client its
    /// group handler may have terminated, and then drops a request such as
    /// `rd_kafka_assignment` unanswered, leaving the caller waiting for good.
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        let owned = self.offsets.owned();
        self.metrics
            .lag_clock
            .owned(owned.iter().map(|(_, partition)| *partition));
        self.metrics
            .readiness
            .partitions_assigned
            .store(!owned.is_empty(), std::sync::atomic::Ordering::Relaxed);
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        match result {
            Ok(()) => {
                tracing::debug!(partitions = offsets.count(), "offset commit confirmed");
                self.offsets.confirm(offsets)
            }
            Err(error) => {
                self.metrics.offset_commit_failures.inc();
                tracing::warn!(%error, "offset commit failed; it is sent again");
            }
        }
    }
}

/// A partition's lag in records: librdkafka's (high watermark minus the
/// committed offset) when it has one; else, as on a topic that never had a
/// record or before the first commit, the high watermark minus where the
/// database says reading is (`database_next`), or minus the log start. None
/// while the broker has not said where the partition ends.
fn lag_of(partition: &rdkafka::statistics::Partition, database_next: Option<i64>) -> Option<i64> {
    if partition.consumer_lag >= 0 {
        return Some(partition.consumer_lag);
    }
    if partition.hi_offset < 0 {
        return None;
    }
    let from = database_next.unwrap_or(partition.lo_offset.max(0));
    Some((partition.hi_offset - from).max(0))
}

/// Hands partitions back to librdkafka: those of the list (cooperative), or
/// the whole assignment (eager).
fn unassign<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: &TopicPartitionList,
    cooperative: bool,
) {
    let released = if cooperative {
        consumer.incremental_unassign(partitions)
    } else {
        consumer.unassign()
    };
    if let Err(error) = released {
        tracing::error!(%error, "releasing partitions failed");
    }
}

/// Sends an offset commit without waiting for it. Its result comes back as
/// an event on the consumer's own queue, which `recv` serves, and so reaches
/// [`InboxContext::commit_callback`]: what Kafka refused is counted, and
/// what it confirmed is not sent again. (`Consumer::commit` in async mode
/// gives librdkafka no queue to answer on, and its result is lost:
/// rust-rdkafka issue #856.)
pub fn commit_async<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    offsets: &TopicPartitionList,
) -> KafkaResult<()> {
    use rdkafka::bindings as rdsys;
    let client = consumer.client().native_ptr();
    // SAFETY: `client` and `offsets` are live for the whole call; librdkafka
    // copies the list, and takes its own reference on the queue for the
    // reply, so the handle obtained here is released right after.
    let error = unsafe {
        let queue = rdsys::rd_kafka_queue_get_consumer(client);
        let error =
            rdsys::rd_kafka_commit_queue(client, offsets.ptr(), queue, None, std::ptr::null_mut());
        rdsys::rd_kafka_queue_destroy(queue);
        error
    };
    if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(rdkafka::error::KafkaError::ConsumerCommit(error.into()))
    }
}

/// The partition numbers of a list, for logs: `0,5,7`.
fn partition_numbers(partitions: &TopicPartitionList) -> String {
    let numbers: Vec<String> = partitions
        .elements()
        .iter()
        .map(|e| e.partition().to_string())
        .collect();
    numbers.join(",")
}

/// Of `topics`, those the cluster does not have (it does not create topics
/// on demand, or the consumer would wait for one forever, saying nothing).
pub async fn missing_topics(
    settings: &KafkaSettings,
    topics: &[String],
) -> KafkaResult<Vec<String>> {
    use rdkafka::consumer::BaseConsumer;
    use rdkafka::types::RDKafkaRespErr;
    let client: BaseConsumer = settings
        .client_config()
        .create()
        .map_err(|error| settings.scrub(error))?;
    let topics = topics.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut missing = Vec::new();
        for topic in topics {
            let metadata = client.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
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

/// Copies a polled message into an owned record.
pub fn to_record(message: &BorrowedMessage<'_>) -> InboundRecord {
    InboundRecord {
        topic: message.topic().to_owned(),
        partition: message.partition(),
        offset: message.offset(),
        timestamp: message.timestamp().to_millis(),
        key: message.key().map(<[u8]>::to_vec),
        payload: message.payload().map(<[u8]>::to_vec),
        headers: headers_of(message),
    }
}

/// A record's headers, keys and values as the producer sent them. A key
/// that is not UTF-8 becomes `hex:` and its bytes in hex, as the parked row
/// stores a key jsonb cannot hold (rust-rdkafka's header iterator panics on
/// such a key, so they are read from librdkafka directly).
fn headers_of(message: &BorrowedMessage<'_>) -> Vec<Header> {
    use rdkafka::bindings as rdsys;
    let mut headers = Vec::new();
    let mut native: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: the message is live for the whole call, and the headers it
    // owns with it; every pointer read here is copied before returning.
    unsafe {
        if rdsys::rd_kafka_message_headers(message.ptr(), &mut native)
            != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            || native.is_null()
        {
            return headers;
        }
        for index in 0..rdsys::rd_kafka_header_cnt(native) {
            let mut name: *const std::os::raw::c_char = std::ptr::null();
            let mut value: *const std::os::raw::c_void = std::ptr::null();
            let mut size = 0usize;
            let found =
                rdsys::rd_kafka_header_get_all(native, index, &mut name, &mut value, &mut size);
            if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                continue;
            }
            let key = std::ffi::CStr::from_ptr(name).to_bytes();
            let value = (!value.is_null())
                .then(|| std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec());
            headers.push(Header {
                key: crate::parked::header_key_text(key),
                value,
            });
        }
    }
    headers
}

/// Headers added to a DLQ copy, besides the record's own.
pub mod dlq_headers {
    pub const REASON: &str = "inbox.reason";
    pub const ERROR: &str = "inbox.error";
    pub const SOURCE_TOPIC: &str = "inbox.source.topic";
    pub const SOURCE_PARTITION: &str = "inbox.source.partition";
    pub const SOURCE_OFFSET: &str = "inbox.source.offset";
    /// The trace id of the batch span that parked it (tracing on).
    pub const TRACE_ID: &str = "inbox.trace_id";
    /// `omitted` when the copy carries no payload (`DLQ_PAYLOAD=omit`).
    pub const PAYLOAD: &str = "inbox.payload";
}

/// Copies of parked records to the DLQ topic. The `inbox_parked` table is
/// the durable record, and says which copies are still owed: a copy that
/// fails, or was never sent (a lost answer, a crash), is sent again by the
/// partition's owner from the row, never retried into the hot path.
pub struct Dlq {
    producer: FutureProducer,
    topic: String,
    /// Counts the copies that fail (`inbox_dlq_publish_failures_total`).
    metrics: Metrics,
    /// Copies without the payload (`DLQ_PAYLOAD=omit`).
    omit_payload: bool,
    /// The parked rows whose copies are on their way, and those the topic
    /// confirmed and the database does not know yet.
    copies: std::sync::Arc<Mutex<Copies>>,
}

/// Copies by parked row id (see [`Dlq`]).
#[derive(Debug, Default)]
struct Copies {
    in_flight: BTreeSet<i64>,
    delivered: Vec<i64>,
}

impl Dlq {
    pub fn new(
        settings: &KafkaSettings,
        topic: String,
        metrics: Metrics,
        omit_payload: bool,
    ) -> KafkaResult<Self> {
        let producer = settings
            .client_config()
            .set("linger.ms", "5")
            .set("message.timeout.ms", "30000")
            .create()
            .map_err(|error| settings.scrub(error))?;
        Ok(Dlq {
            producer,
            topic,
            metrics,
            omit_payload,
            copies: Default::default(),
        })
    }

    /// The parked rows whose copies are on their way now.
    pub fn in_flight(&self) -> Vec<i64> {
        let copies = self.copies.lock().expect("copies lock");
        copies.in_flight.iter().copied().collect()
    }

    /// The parked rows whose copies the topic confirmed since the last call.
    pub fn take_delivered(&self) -> Vec<i64> {
        std::mem::take(&mut self.copies.lock().expect("copies lock").delivered)
    }

    /// Confirmed copies the database could not be told of: told next time.
    pub fn delivered_again(&self, ids: Vec<i64>) {
        self.copies
            .lock()
            .expect("copies lock")
            .delivered
            .extend(ids);
    }

    /// Sends a copy of each parked record, with the reason and source
    /// position as headers; does not wait for delivery. A row whose copy is
    /// on its way already is skipped; a copy confirmed is remembered for
    /// [`Dlq::take_delivered`].
    pub fn publish(&self, parked: &[(ParkedRow, &InboundRecord)]) {
        for (row, record) in parked {
            if let Some(id) = row.id {
                if !self
                    .copies
                    .lock()
                    .expect("copies lock")
                    .in_flight
                    .insert(id)
                {
                    continue;
                }
            }
            let mut headers = OwnedHeaders::new();
            // Secrets are redacted in the copy as in the parked row.
            for header in &crate::parked::redacted(&record.headers) {
                headers = headers.insert(KafkaHeader {
                    key: &header.key,
                    value: header.value.as_deref(),
                });
            }
            let partition = row.partition.to_string();
            let offset = row.offset.to_string();
            for (key, value) in [
                (dlq_headers::REASON, row.reason.as_str()),
                (dlq_headers::ERROR, row.error.as_str()),
                (dlq_headers::SOURCE_TOPIC, row.topic.as_str()),
                (dlq_headers::SOURCE_PARTITION, partition.as_str()),
                (dlq_headers::SOURCE_OFFSET, offset.as_str()),
            ]
            .into_iter()
            .chain(
                row.trace_id
                    .as_deref()
                    .map(|id| (dlq_headers::TRACE_ID, id)),
            )
            .chain(
                self.omit_payload
                    .then_some((dlq_headers::PAYLOAD, "omitted")),
            ) {
                headers = headers.insert(KafkaHeader {
                    key,
                    value: Some(value),
                });
            }
            let mut copy = FutureRecord::<[u8], [u8]>::to(&self.topic).headers(headers);
            if let Some(payload) = record.payload.as_deref().filter(|_| !self.omit_payload) {
                copy = copy.payload(payload);
            }
            if let Some(key) = record.key.as_deref() {
                copy = copy.key(key);
            }
            let (id, copies) = (row.id, self.copies.clone());
            let settled = move |delivered: bool| {
                if let Some(id) = id {
                    let mut copies = copies.lock().expect("copies lock");
                    copies.in_flight.remove(&id);
                    if delivered {
                        copies.delivered.push(id);
                    }
                }
            };
            match self.producer.send_result(copy) {
                Ok(delivery) => {
                    let failures = self.metrics.dlq_publish_failures.clone();
                    tokio::spawn(async move {
                        match delivery.await {
                            Ok(Ok(_)) => settled(true),
                            Ok(Err((error, _))) => {
                                settled(false);
                                failures.inc();
                                tracing::warn!(%error, "DLQ copy not delivered; the parked row still owes it");
                            }
                            Err(_) => settled(false),
                        }
                    });
                }
                Err((error, _)) => {
                    settled(false);
                    self.metrics.dlq_publish_failures.inc();
                    tracing::warn!(%error, "DLQ copy not queued; the parked row still owes it")
                }
            }
        }
    }

    /// Waits (bounded) for queued copies before the process exits.
    pub fn flush(&self, timeout: Duration) {
        let _ = rdkafka::producer::Producer::flush(&self.producer, timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(partition: i32) -> PartitionKey {
        ("orders".to_owned(), partition)
    }

    fn offsets(list: &TopicPartitionList) -> Vec<(i32, i64)> {
        list.elements()
            .iter()
            .map(|e| (e.partition(), e.offset().to_raw().expect("an offset")))
            .collect()
    }

    fn assigned(partitions: &[i32]) -> CommittedOffsets {
        let tracked = CommittedOffsets::default();
        let mut list = TopicPartitionList::new();
        for partition in partitions {
            list.add_partition("orders", *partition);
        }
        tracked.assign(&list);
        tracked
    }

    #[test]
    fn an_offset_stays_unconfirmed_until_kafka_confirms_it_or_a_higher_one() {
        let tracked = assigned(&[0, 1]);
        tracked.advance(&BTreeMap::from([(key(0), 10), (key(1), 20)]));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(0, 10), (1, 20)]);

        // A commit of partition 0 went through; partition 1's failed.
        tracked.confirm(&to_list(BTreeMap::from([(key(0), 10)]).iter()));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(1, 20)]);

        // The database moves on: partition 0 needs a commit again.
        tracked.advance(&BTreeMap::from([(key(0), 15)]));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(0, 15), (1, 20)]);

        // A late confirmation of an older commit changes nothing.
        tracked.confirm(&to_list(BTreeMap::from([(key(1), 12)]).iter()));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(0, 15), (1, 20)]);

        tracked.confirm(&tracked.all());
        assert_eq!(tracked.unconfirmed().count(), 0);
    }

    #[test]
    fn a_revoked_partition_is_not_committed_again() {
        let tracked = assigned(&[0, 1]);
        tracked.advance(&BTreeMap::from([(key(0), 10), (key(1), 20)]));
        let mut revoked = TopicPartitionList::new();
        revoked.add_partition("orders", 1);
        let released = tracked.release(&revoked);
        assert_eq!(offsets(&released), vec![(1, 20)]);
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(0, 10)]);
        assert_eq!(tracked.take_revoked(), vec![key(1)]);

        // A lane that applied a batch of partition 1 before the revoke
        // finishes after it: the offset is not tracked, nor to be committed.
        let owned = tracked.advance(&BTreeMap::from([(key(0), 12), (key(1), 25)]));
        assert_eq!(owned, BTreeMap::from([(key(0), 12)]));
        assert_eq!(offsets(&tracked.all()), vec![(0, 12)]);
    }

    #[test]
    fn a_partition_revoked_while_its_batch_was_retried_is_not_rewound_into_tracking() {
        let tracked = assigned(&[0, 1]);
        tracked.advance(&BTreeMap::from([(key(0), 10), (key(1), 20)]));
        let mut revoked = TopicPartitionList::new();
        revoked.add_partition("orders", 1);
        tracked.release(&revoked);
        tracked.rewind(&key(1), Some(5));
        tracked.rewind(&key(0), Some(7));
        assert_eq!(offsets(&tracked.all()), vec![(0, 7)]);
    }

    #[test]
    fn a_start_at_the_databases_position_is_committed_until_confirmed() {
        let tracked = assigned(&[0, 1]);
        tracked.advance(&BTreeMap::from([(key(0), 10)]));
        tracked.confirm(&tracked.all());
        // Partition 1 starts at 40; partition 7 is not this member's.
        tracked.started_at(&BTreeMap::from([(key(1), 40), (key(7), 3)]));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(1, 40)]);

        tracked.confirm(&to_list(BTreeMap::from([(key(1), 40)]).iter()));
        assert_eq!(tracked.unconfirmed().count(), 0);
        tracked.advance(&BTreeMap::from([(key(1), 45)]));
        assert_eq!(offsets(&tracked.unconfirmed()), vec![(1, 45)]);
    }
}

#[cfg(test)]
mod scrub_tests {
    use super::*;
    use rdkafka::types::RDKafkaConfRes;

    fn settings(properties: &[(&str, &str)]) -> KafkaSettings {
        KafkaSettings {
            bootstrap_servers: "127.0.0.1:9092".into(),
            group_protocol: crate::config::GroupProtocol::Classic,
            properties: properties
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn no_property_value_that_could_be_a_secret_reaches_an_error() {
        let settings = settings(&[
            ("sasl.password", "pw"),
            ("socket.timeout.ms", "hunter2hunter2"),
            ("acks", "all"),
        ]);
        let scrubbed = settings.scrub(KafkaError::ClientConfig(
            RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
            "Invalid value \"hunter2hunter2\" for configuration property \"socket.timeout.ms\"; pw"
                .into(),
            "socket.timeout.ms".into(),
            "hunter2hunter2".into(),
        ));
        let text = scrubbed.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("; pw"), "{text}");
        assert!(text.contains("socket.timeout.ms"), "{text}");
        let created = settings
            .scrub(KafkaError::ClientCreation(
                "call me all hunter2hunter2".into(),
            ))
            .to_string();
        assert_eq!(created, "Client creation error: call me all [redacted]");
    }
}
