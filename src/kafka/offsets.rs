//! The offset-commit path, all of it: which offsets the database holds per
//! owned partition ([`CommittedOffsets`]), and the two ways they reach
//! Kafka ([`send`] without waiting, after each round; [`commit_now`],
//! waiting, on a revoke and at close).
//!
//! Invariant: an offset reaches Kafka only after the database transaction
//! of the batch containing the record before it committed. The pipeline
//! records those offsets here right after the DB commit; the rebalance
//! callback commits them synchronously when partitions are revoked, before
//! librdkafka releases them, and forgets them, so a partition's new owner
//! starts exactly where the database is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext};
use rdkafka::error::KafkaResult;
use rdkafka::{Offset, TopicPartitionList};

use crate::batch::PartitionKey;
use crate::metrics::Metrics;
use crate::observe::{CommitStep, OffsetCommitFailed};

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
    /// One lock: every change below touches several of its parts at once.
    tracked: Mutex<Tracked>,
}

#[derive(Debug, Default)]
struct Tracked {
    /// The partitions assigned to this member now.
    assigned: BTreeSet<PartitionKey>,
    next: BTreeMap<PartitionKey, i64>,
    /// What Kafka confirmed it holds, per partition. A commit can fail (the
    /// group rebalancing, the coordinator moving) with no later batch on
    /// that partition to carry the offset: [`CommittedOffsets::unconfirmed`]
    /// tells the pipeline what to send again.
    confirmed: BTreeMap<PartitionKey, i64>,
    /// Partitions revoked since the pipeline last looked: records of these
    /// still held in memory must be dropped (their new owner rereads them).
    revoked: Vec<PartitionKey>,
    /// When the commit sent without waiting that Kafka has not answered yet
    /// was sent ([`CommittedOffsets::may_send`]).
    in_flight_since: Option<Instant>,
}

/// How long a commit sent without waiting is waited for before another is
/// sent beside it: its answer may have been lost with the coordinator.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

impl CommittedOffsets {
    fn tracked(&self) -> std::sync::MutexGuard<'_, Tracked> {
        self.tracked.lock().expect("offsets lock")
    }

    /// Records offsets after a DB commit, for the partitions still
    /// assigned; never moves an offset backwards. Returns the offsets to
    /// commit: those of the partitions still owned.
    pub fn advance(&self, offsets: &BTreeMap<PartitionKey, i64>) -> BTreeMap<PartitionKey, i64> {
        let mut tracked = self.tracked();
        let mut owned = BTreeMap::new();
        for (key, offset) in offsets {
            if !tracked.assigned.contains(key) {
                continue;
            }
            let entry = tracked.next.entry(key.clone()).or_insert(*offset);
            *entry = (*entry).max(*offset);
            owned.insert(key.clone(), *offset);
        }
        owned
    }

    /// The database went back for a partition this member reads again from
    /// `position` (`None`: from its beginning): the offset to commit goes back
    /// with it, and is sent to Kafka again.
    pub fn rewind(&self, key: &PartitionKey, position: Option<i64>) {
        let mut tracked = self.tracked();
        // A partition revoked meanwhile is its new owner's to commit.
        if !tracked.assigned.contains(key) {
            return;
        }
        match position {
            Some(position) => tracked.next.insert(key.clone(), position),
            None => tracked.next.remove(key),
        };
        tracked.confirmed.remove(key);
    }

    /// Partitions newly assigned to this member.
    pub fn assign(&self, partitions: &TopicPartitionList) {
        let mut tracked = self.tracked();
        for element in partitions.elements() {
            tracked
                .assigned
                .insert((element.topic().to_owned(), element.partition()));
        }
    }

    /// Newly assigned partitions start at the database's positions: those
    /// are the offsets to commit until a batch moves them, sent with the
    /// unconfirmed ones (Kafka may hold an older offset, left by a member
    /// that died between its database commit and its offset commit).
    pub fn started_at(&self, starts: &BTreeMap<PartitionKey, i64>) {
        let mut tracked = self.tracked();
        for (key, offset) in starts {
            if tracked.assigned.contains(key) {
                tracked.next.insert(key.clone(), *offset);
                tracked.confirmed.remove(key);
            }
        }
    }

    /// The next offset of a partition the database holds (from its last
    /// batch, or its position at assignment), when this member tracks it.
    pub fn next_of(&self, key: &PartitionKey) -> Option<i64> {
        self.tracked().next.get(key).copied()
    }

    /// The partitions assigned to this member now.
    pub fn owned(&self) -> Vec<PartitionKey> {
        self.tracked().assigned.iter().cloned().collect()
    }

    /// Every tracked offset, as a list to commit.
    pub fn all(&self) -> TopicPartitionList {
        to_list(self.tracked().next.iter())
    }

    /// Whether a commit may be sent without waiting now, and if so, that it
    /// is in flight from now: one at a time, each carrying the newest
    /// offsets of every partition. A commit per round would queue up behind
    /// the group coordinator once rounds come faster than it answers (one
    /// record a round: 20 s of commits queued after 5,000 records, which
    /// the commit at close waited behind), and a later offset makes an
    /// earlier one moot.
    pub fn may_send(&self) -> bool {
        let mut tracked = self.tracked();
        if tracked
            .in_flight_since
            .is_some_and(|since| since.elapsed() < ANSWER_WAIT)
        {
            return false;
        }
        tracked.in_flight_since = Some(Instant::now());
        true
    }

    /// Kafka answered a commit (it confirmed or refused it): the next may
    /// be sent. The answer to a commit made waiting (on a revoke, at close)
    /// comes here too and may let one more go beside one in flight: two at
    /// most, never a queue.
    pub fn answered(&self) {
        self.tracked().in_flight_since = None;
    }

    /// Records what a successful commit made Kafka hold.
    pub fn confirm(&self, committed: &TopicPartitionList) {
        let mut tracked = self.tracked();
        for element in committed.elements() {
            if let (Ok(()), Offset::Offset(offset)) = (element.error(), element.offset()) {
                let key = (element.topic().to_owned(), element.partition());
                let entry = tracked.confirmed.entry(key).or_insert(offset);
                *entry = (*entry).max(offset);
            }
        }
    }

    /// Offsets the database holds that Kafka has not confirmed yet.
    pub fn unconfirmed(&self) -> TopicPartitionList {
        let tracked = self.tracked();
        to_list(
            tracked
                .next
                .iter()
                .filter(|(key, offset)| tracked.confirmed.get(*key).is_none_or(|c| c < *offset)),
        )
    }

    /// Partitions revoked since the last call.
    pub fn take_revoked(&self) -> Vec<PartitionKey> {
        std::mem::take(&mut self.tracked().revoked)
    }

    /// Forgets the revoked partitions, and returns their offsets (to commit
    /// before they are released).
    pub(super) fn release(&self, revoked: &TopicPartitionList) -> TopicPartitionList {
        let mut tracked = self.tracked();
        let mut released = BTreeMap::new();
        for element in revoked.elements() {
            let key = (element.topic().to_owned(), element.partition());
            tracked.assigned.remove(&key);
            if let Some(offset) = tracked.next.remove(&key) {
                released.insert(key.clone(), offset);
            }
            tracked.confirmed.remove(&key);
            tracked.revoked.push(key);
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

/// Sends an offset commit without waiting for it (after a round, and the
/// unconfirmed ones again). Its result reaches the commit callback
/// ([`super::InboxContext`]): what Kafka refused is counted there, what it
/// confirmed is not sent again. A commit that could not even be sent is
/// counted here, and sent again with the unconfirmed ones. True when it was
/// sent (an answer is to come).
pub fn send<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    offsets: &TopicPartitionList,
    metrics: &Metrics,
) -> bool {
    if offsets.count() == 0 {
        return false;
    }
    match commit_async(consumer, offsets) {
        Ok(()) => true,
        Err(error) => {
            OffsetCommitFailed {
                error: &error,
                step: CommitStep::NotSent,
            }
            .emit(metrics);
            false
        }
    }
}

/// Commits and waits for Kafka's answer: before revoked partitions are
/// released (`step` [`CommitStep::OnRevoke`]), and at close
/// ([`CommitStep::OnClose`]). A failure is counted and logged; the records
/// after the offset Kafka holds are read again, and ignored as duplicates.
pub fn commit_now<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    offsets: &TopicPartitionList,
    step: CommitStep,
    metrics: &Metrics,
) {
    if offsets.count() == 0 {
        return;
    }
    if let Err(error) = consumer.commit(offsets, CommitMode::Sync) {
        OffsetCommitFailed {
            error: &error,
            step,
        }
        .emit(metrics);
    }
}

/// Sends an offset commit without waiting for it. Its result comes back as
/// an event on the consumer's own queue, which `recv` serves, and so reaches
/// the consumer context's `commit_callback`. (`Consumer::commit` in async
/// mode gives librdkafka no queue to answer on, and its result is lost:
/// rust-rdkafka issue #856.)
fn commit_async<C: ConsumerContext>(
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
    fn one_commit_is_in_flight_at_a_time() {
        let tracked = assigned(&[0]);
        assert!(tracked.may_send());
        assert!(!tracked.may_send(), "the first is not answered yet");
        tracked.answered();
        assert!(tracked.may_send(), "answered: the next may go");
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
