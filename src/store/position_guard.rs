//! The position guard: the position this member last wrote per partition,
//! or read when the partition was assigned, and the Kafka id of each topic
//! then. A database whose position is behind it went back (restored, or
//! failed over to a replica that lacked the last commits), and the batch
//! statement refuses to go on there (`PositionBehind`); a position an
//! operator set is told from one lost the same way
//! (docs/design.md#positions).

use std::collections::BTreeMap;
use std::sync::Mutex;

use uuid::Uuid;

use super::positions::{self, Stored};
use super::{DbPool, StoreError};
use crate::batch::PartitionKey;

/// Partitions to read again from the database's position: it is behind
/// this member's (the database went back), or an operator set it
/// (`inventory-inbox positions set`, either way).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Behind {
    /// The database's position of each (`None`: it has none).
    pub positions: BTreeMap<PartitionKey, Option<Stored>>,
}

impl Behind {
    /// The partition's position was set by an operator, not lost by the
    /// database.
    pub fn by_operator(&self, key: &PartitionKey) -> bool {
        self.positions
            .get(key)
            .is_some_and(|stored| stored.is_some_and(|s| s.by_operator))
    }
}

/// What the batch statement checks a partition's position against, and
/// writes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expectation {
    /// The position this member last read or wrote (none yet: `None`).
    pub position: Option<i64>,
    /// The topic's id, as the broker said at the assignment (it did not:
    /// `None`).
    pub topic_id: Option<Uuid>,
}

/// The positions this member expects the database at.
#[derive(Debug)]
pub struct PositionGuard {
    pool: DbPool,
    /// The ledger's consumer, whose positions these are.
    consumer: String,
    expected: Mutex<Expected>,
}

/// The guard's state, under one lock.
#[derive(Debug, Default)]
struct Expected {
    /// Per partition, the position last written or read: seeded at
    /// assignment, so that a database restored under a member that has not
    /// written yet is caught too.
    written: BTreeMap<PartitionKey, i64>,
    /// Kafka's id of each topic, as read at the last assignment: the
    /// positions written carry it (see `inbox_position.topic_id`).
    topic_ids: BTreeMap<String, Uuid>,
}

impl PositionGuard {
    pub fn new(pool: DbPool, consumer: String) -> Self {
        PositionGuard {
            pool,
            consumer,
            expected: Mutex::new(Expected::default()),
        }
    }

    /// Partitions assigned to this member, and the database's positions of
    /// them as read then (absent: it has none): what the database must not
    /// go behind from now on. `topic_ids` are Kafka's ids of their topics,
    /// which the positions this member writes carry from now on.
    pub fn expect(
        &self,
        assigned: &[PartitionKey],
        positions: &BTreeMap<PartitionKey, i64>,
        topic_ids: &BTreeMap<String, Uuid>,
    ) {
        let mut expected = self.expected.lock().expect("positions lock");
        expected
            .topic_ids
            .extend(topic_ids.iter().map(|(topic, id)| (topic.clone(), *id)));
        for key in assigned {
            match positions.get(key) {
                Some(position) => expected.written.insert(key.clone(), *position),
                None => expected.written.remove(key),
            };
        }
    }

    /// Kafka's id of the topic as read at its last assignment.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.expected
            .lock()
            .expect("positions lock")
            .topic_ids
            .get(topic)
            .copied()
    }

    /// What the batch statement checks each of these partitions against.
    pub(super) fn expectations<'k>(
        &self,
        keys: impl Iterator<Item = &'k PartitionKey>,
    ) -> Vec<Expectation> {
        let expected = self.expected.lock().expect("positions lock");
        keys.map(|key| Expectation {
            position: expected.written.get(key).copied(),
            topic_id: expected.topic_ids.get(&key.0).copied(),
        })
        .collect()
    }

    /// A batch committed: these positions are the database's now (a
    /// position only moves forward here).
    pub(super) fn wrote(&self, positions: &BTreeMap<PartitionKey, i64>) {
        let mut expected = self.expected.lock().expect("positions lock");
        for (key, next) in positions {
            let entry = expected.written.entry(key.clone()).or_insert(*next);
            *entry = (*entry).max(*next);
        }
    }

    /// After the statement refused a batch of these partitions for
    /// positions behind this member's: the error that says which, and
    /// where the database is. They are forgotten as written, so that the
    /// batches read again from there go.
    pub(super) async fn refused_behind(&self, keys: Vec<PartitionKey>) -> StoreError {
        match self.gone_back(&keys).await {
            Ok(behind) if behind.positions.is_empty() => StoreError::Transient {
                // Moved forward since (another member): simply try again.
                reason: super::RetryReason::PositionBehind,
                message: "the database's position moved while it was checked".into(),
            },
            Ok(behind) => StoreError::PositionBehind(behind),
            Err(error) => error,
        }
    }

    /// The partitions among `keys` to read again from the database's
    /// position: behind the one this member wrote or read at their
    /// assignment (the database went back: restored, or failed over to a
    /// replica that lacked the last commits), or set by an operator to
    /// another than that (backwards or forwards), with the database's
    /// position (`None`: it has none). They are expected at the database's
    /// position from now on.
    /// The database is asked even when no position is expected yet: the
    /// answer also says that it answers.
    pub async fn gone_back(&self, keys: &[PartitionKey]) -> Result<Behind, StoreError> {
        let topic_ids = self
            .expected
            .lock()
            .expect("positions lock")
            .topic_ids
            .clone();
        let stored = self
            .pool
            .with_answer_deadline(positions::read(
                &self.pool,
                &self.consumer,
                keys,
                &topic_ids,
            ))
            .await?;
        let mut behind = Behind::default();
        let written = &mut self.expected.lock().expect("positions lock").written;
        for key in keys.iter().cloned() {
            let database = stored.get(&key).copied();
            let mine = written.get(&key).copied();
            let position = database.map(|d| d.next_offset);
            let gone_back = mine.is_some_and(|mine| position.is_none_or(|d| d < mine));
            let set_by_operator = database.is_some_and(|d| d.by_operator) && position != mine;
            if gone_back || set_by_operator {
                behind.positions.insert(key.clone(), database);
                match position {
                    Some(d) => written.insert(key, d),
                    None => written.remove(&key),
                };
            }
        }
        Ok(behind)
    }
}
