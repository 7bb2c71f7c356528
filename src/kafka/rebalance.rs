//! The consumer's context: librdkafka calls it from inside `recv` for a
//! rebalance (newly assigned partitions start at the database's positions,
//! revoked ones get their offsets committed before they are released, and
//! the fetchers of the partitions kept are woken), for a commit's answer,
//! and for statistics (lag per owned partition).

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance, RebalanceProtocol};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::offsets::{self, CommittedOffsets};
use super::start::PositionSource;
use crate::metrics::Metrics;
use crate::observe::{CommitStep, OffsetCommitFailed, Rebalanced};

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
                // Nothing is in flight here: batches run between polls, and
                // records polled but not yet committed are dropped by the
                // pipeline (see `take_revoked`). Commit what the database has,
                // synchronously, before the partitions are released.
                let offsets = self.offsets.release(partitions);
                offsets::commit_now(consumer, &offsets, CommitStep::OnRevoke, &self.metrics);
                Rebalanced::Revoked(partitions).emit(&self.metrics);
            }
            Rebalance::Assign(partitions) => {
                self.offsets.assign(partitions);
                Rebalanced::Assigned(partitions).emit(&self.metrics);
            }
            Rebalance::Error(error) => tracing::warn!(%error, "rebalance error"),
        }
    }

    /// The partitions owned now come from this context's own bookkeeping,
    /// not from librdkafka: after the last revoke of a closing client its
    /// group handler may have terminated, and then drops a request such as
    /// `rd_kafka_assignment` unanswered, leaving the caller waiting for good.
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        let owned = self.offsets.owned();
        wake_fetchers(consumer, &owned);
        self.metrics
            .lag_clock
            .owned(owned.iter().map(|(_, partition)| *partition));
        self.metrics
            .readiness
            .partitions_assigned
            .store(!owned.is_empty(), std::sync::atomic::Ordering::Relaxed);
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        self.offsets.answered();
        match result {
            Ok(()) => {
                tracing::debug!(partitions = offsets.count(), "offset commit confirmed");
                self.offsets.confirm(offsets)
            }
            Err(error) => OffsetCommitFailed {
                error: &error,
                step: CommitStep::Refused,
            }
            .emit(&self.metrics),
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

/// Longest wait for the leaders' answer in [`wake_fetchers`]; the wake-up
/// is done by then whatever they answer.
const WAKE_TIMEOUT: Duration = Duration::from_millis(500);

/// Wakes the threads that fetch the partitions this member keeps after a
/// rebalance. librdkafka (2.12) pauses every assigned partition while an
/// incremental rebalance is handed to the application and resumes them
/// afterwards on its main thread, without waking the broker threads that
/// fetch them: a broker thread with nothing else in flight sleeps up to a
/// second (`rd_kafka_max_block_ms`) before it looks again, and meanwhile
/// the partitions the member keeps are not read. A request to their
/// leaders wakes those threads, and the answer, one round trip later, wakes
/// them again after the resume: a ListOffsets of the partitions' ends,
/// whose answer is dropped. Measured in a rolling deploy: the partitions a
/// member kept stalled 0.5–1 s at every member that joined; 0.1 s with
/// this (docs/deploy.md#deploys-under-load).
fn wake_fetchers<C: ConsumerContext>(consumer: &BaseConsumer<C>, owned: &[(String, i32)]) {
    if owned.is_empty() {
        return;
    }
    let mut ends = TopicPartitionList::new();
    for (topic, partition) in owned {
        let _ = ends.add_partition_offset(topic, *partition, Offset::End);
    }
    if let Err(error) = consumer.offsets_for_times(ends, WAKE_TIMEOUT) {
        tracing::debug!(%error, "the leaders did not answer the wake-up of the fetchers");
    }
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
