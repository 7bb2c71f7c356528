//! A batch: the records of one poll, classified once, with the offsets their
//! commit will acknowledge. Pure: no I/O.
//!
//! A record is decoded once, where the pipeline classifies its round into a
//! [`Batch`]: each record carries its decoded event with the fingerprint of
//! the same parse, and the store (a retry, a split batch, a window read
//! again) reuses them, never parsing the payload again. The offsets to
//! commit are derived once too, when the batch is made: per partition, the
//! highest offset of the batch + 1, handed to Kafka only after the batch's
//! database transaction committed.
//!
//! Within a batch the same message id twice counts once (the later record is
//! a duplicate and never reaches the database twice).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use uuid::Uuid;

use crate::event::{self, Decoded, Header, ParkReason, Rejection};
use crate::window::DedupWindow;

/// A record as polled from Kafka, owned so a batch can outlive the poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record's Kafka timestamp (milliseconds since the epoch), when it
    /// has one: how old an unapplied record is (lag in seconds).
    pub timestamp: Option<i64>,
    /// The record key (the order id); kept for the DLQ copy.
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

impl InboundRecord {
    /// The hash of this record's bytes, which ledger rows written before
    /// fingerprints hold.
    pub fn payload_hash(&self) -> i64 {
        event::payload_hash(self.payload.as_deref().unwrap_or_default())
    }

    /// Whether the record is of one of `partitions`.
    pub fn is_in(&self, partitions: &[PartitionKey]) -> bool {
        partitions
            .iter()
            .any(|(topic, partition)| *topic == self.topic && *partition == self.partition)
    }
}

/// What a batch does with one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Valid and inside the dedup window: goes to the ledger, which decides
    /// whether it is fresh or a duplicate (by the event's fingerprint).
    Candidate,
    /// Its message id appeared earlier in the same batch: a duplicate, or an
    /// id conflict when its fingerprint differs from the ledger's.
    RepeatInBatch,
    /// Not applicable: parked with this reason.
    Parked(Rejection),
}

/// One record, its one parse and its disposition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub record: InboundRecord,
    /// The record's event with its fingerprint, or why it is none: kept
    /// also when the window parks it, so that a window read again judges
    /// it without a second parse.
    pub decoded: Result<Decoded, Rejection>,
    pub disposition: Disposition,
}

impl Classified {
    /// The event the batch applies (a candidate or an in-batch repeat), or
    /// why the record is parked.
    pub fn verdict(&self) -> Result<&Decoded, &Rejection> {
        match (&self.disposition, &self.decoded) {
            (Disposition::Parked(rejection), _) => Err(rejection),
            (_, Ok(decoded)) => Ok(decoded),
            // Only a record that decoded is a candidate or a repeat.
            (_, Err(rejection)) => Err(rejection),
        }
    }

    /// The event the batch applies; `None` for a parked record.
    pub fn event(&self) -> Option<&Decoded> {
        self.verdict().ok()
    }

    /// The record's message id, when it has a valid one.
    pub fn message_id(&self) -> Option<Uuid> {
        match self.verdict() {
            Ok(event) => Some(event.message_id),
            Err(rejection) => rejection.message_id,
        }
    }

    /// The order id of a record that decoded as an event.
    pub fn order_id(&self) -> Option<&str> {
        self.event().map(|event| event.order_id.as_str())
    }
}

/// The records of one batch, in poll order, classified once; the window
/// they were judged against; and per partition the next offset their
/// commit acknowledges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    items: Vec<Classified>,
    /// The dedup window the dispositions were judged against: a batch
    /// applied under another (a day dropped or created since) is judged
    /// again, from the same parse ([`Batch::in_window`]).
    window: DedupWindow,
    /// Per partition, the highest offset of the batch + 1.
    next_offsets: BTreeMap<PartitionKey, i64>,
}

impl Batch {
    /// Classifies records in poll order: decode and validate (one parse
    /// each), check the dedup window, and mark repeated message ids as
    /// in-batch repeats (the ledger then tells a duplicate from an id
    /// reused for another payload).
    pub fn classify(records: Vec<InboundRecord>, window: &DedupWindow) -> Batch {
        let next_offsets = next_offsets(&records);
        let decoded = records.into_iter().map(|record| {
            let decoded = event::decode(record.payload.as_deref(), &record.headers);
            (record, decoded)
        });
        Batch {
            items: judge(decoded, window),
            window: window.clone(),
            next_offsets,
        }
    }

    /// This batch as judged against `window`: itself when it was judged
    /// against it, else its records judged again (the same parse, the
    /// same offsets).
    pub fn in_window(&self, window: &DedupWindow) -> Cow<'_, Batch> {
        if self.window == *window {
            return Cow::Borrowed(self);
        }
        let decoded = self
            .items
            .iter()
            .map(|item| (item.record.clone(), item.decoded.clone()));
        Cow::Owned(Batch {
            items: judge(decoded, window),
            window: window.clone(),
            next_offsets: self.next_offsets.clone(),
        })
    }

    /// The records and their dispositions, in poll order.
    pub fn items(&self) -> &[Classified] {
        &self.items
    }

    /// The records, in poll order.
    pub fn records(&self) -> impl Iterator<Item = &InboundRecord> {
        self.items.iter().map(|item| &item.record)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Per partition, the next offset to consume after this batch: the
    /// highest offset of it + 1. This is what Kafka's committed offset
    /// means, and the position the batch writes.
    pub fn next_offsets(&self) -> &BTreeMap<PartitionKey, i64> {
        &self.next_offsets
    }

    /// The whole batch, as one statement applies it.
    pub fn whole(&self) -> Part<'_> {
        Part {
            items: &self.items,
            next_offsets: Cow::Borrowed(&self.next_offsets),
        }
    }

    /// Drops the records of `partitions` (revoked, or read again from the
    /// database's position), and their offsets: the other partitions'
    /// offsets stay as they are.
    pub fn drop_partitions(&mut self, partitions: &[PartitionKey]) {
        self.items.retain(|item| !item.record.is_in(partitions));
        self.next_offsets.retain(|key, _| !partitions.contains(key));
    }
}

/// A run of a batch's records that one statement applies, with the
/// positions it moves its partitions to: the whole batch, or a part of it
/// the store split off (a refused record isolated, a part the statement
/// asked for).
#[derive(Debug, Clone)]
pub struct Part<'a> {
    items: &'a [Classified],
    next_offsets: Cow<'a, BTreeMap<PartitionKey, i64>>,
}

impl<'a> Part<'a> {
    /// Records applied on their own: the positions they move to are theirs.
    pub fn of(items: &'a [Classified]) -> Part<'a> {
        Part {
            items,
            next_offsets: Cow::Owned(next_offsets(items.iter().map(|item| &item.record))),
        }
    }

    /// Its records, in poll order.
    pub fn items(&self) -> &'a [Classified] {
        self.items
    }

    /// Per partition, the highest offset of the part + 1.
    pub fn next_offsets(&self) -> &BTreeMap<PartitionKey, i64> {
        &self.next_offsets
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The records before `mid` and from it on, in order, each a part.
    pub fn split_at(&self, mid: usize) -> (Part<'a>, Part<'a>) {
        let (first, second) = self.items.split_at(mid);
        (Part::of(first), Part::of(second))
    }
}

/// Each decoded record's disposition under `window`, in poll order.
fn judge(
    decoded: impl Iterator<Item = (InboundRecord, Result<Decoded, Rejection>)>,
    window: &DedupWindow,
) -> Vec<Classified> {
    let mut seen: HashSet<Uuid> = HashSet::with_capacity(decoded.size_hint().0);
    decoded
        .map(|(record, decoded)| {
            let disposition = match &decoded {
                Err(rejection) => Disposition::Parked(rejection.clone()),
                Ok(order) => match window.check(order.event_day()) {
                    Some(reason) => Disposition::Parked(Rejection {
                        reason,
                        detail: format!("event day {} has no ledger partition", order.event_day()),
                        message_id: Some(order.message_id),
                    }),
                    None if !seen.insert(order.message_id) => Disposition::RepeatInBatch,
                    None => Disposition::Candidate,
                },
            };
            Classified {
                record,
                decoded,
                disposition,
            }
        })
        .collect()
}

/// The rejection of a record whose id is known with another payload: a
/// producer bug, not a duplicate.
pub fn id_conflict(message_id: Uuid) -> Rejection {
    Rejection {
        reason: ParkReason::EventIdConflict,
        detail: format!("message id {message_id} was seen with a different payload"),
        message_id: Some(message_id),
    }
}

/// A parked record with the reason it carries.
pub fn park_reason(classified: &Classified) -> Option<ParkReason> {
    match &classified.disposition {
        Disposition::Parked(rejection) => Some(rejection.reason),
        _ => None,
    }
}

/// A topic partition.
pub type PartitionKey = (String, i32);

/// Per partition, the next offset to consume after these records: the
/// highest offset seen + 1. The one place it is derived.
fn next_offsets<'a>(
    records: impl IntoIterator<Item = &'a InboundRecord>,
) -> BTreeMap<PartitionKey, i64> {
    let mut next: BTreeMap<PartitionKey, i64> = BTreeMap::new();
    for record in records {
        let after = record.offset + 1;
        let entry = next
            .entry((record.topic.clone(), record.partition))
            .or_insert(after);
        *entry = (*entry).max(after);
    }
    next
}

/// A round's records split into batches applied concurrently, one per lane,
/// and the records left for the next round.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// At most `lanes` batches of at most `max_records` each, of distinct
    /// partitions.
    pub batches: Vec<Vec<InboundRecord>>,
    /// Later records of partitions that did not fit, in poll order: the next
    /// round starts with them.
    pub left_over: Vec<InboundRecord>,
}

/// Splits a round's records into at most `lanes` batches of at most
/// `max_records`, applied concurrently. A partition's records go to one
/// batch, as a prefix in poll order, the rest of them to the next round, so
/// its batches stay in order (rounds follow one another). A round uses only
/// as many lanes as it has full batches: concurrent batches pay off when
/// there is a backlog, while a small round in one transaction does not wait
/// on the row locks of others. The largest partitions are placed first,
/// each in the batch with the most room.
pub fn round(records: Vec<InboundRecord>, lanes: usize, max_records: usize) -> Round {
    let max_records = max_records.max(1);
    let used = records.len().div_ceil(max_records).clamp(1, lanes.max(1));
    let mut by_partition: BTreeMap<PartitionKey, Vec<(usize, InboundRecord)>> = BTreeMap::new();
    for (index, record) in records.into_iter().enumerate() {
        by_partition
            .entry((record.topic.clone(), record.partition))
            .or_default()
            .push((index, record));
    }
    let mut partitions: Vec<Vec<(usize, InboundRecord)>> = by_partition.into_values().collect();
    partitions.sort_by_key(|records| std::cmp::Reverse(records.len()));
    let mut batches: Vec<Vec<InboundRecord>> = vec![Vec::new(); used];
    let mut left_over: Vec<(usize, InboundRecord)> = Vec::new();
    for mut records in partitions {
        let roomiest = batches
            .iter_mut()
            .min_by_key(|batch| batch.len())
            .expect("at least one lane");
        let fits = records.len().min(max_records - roomiest.len());
        left_over.extend(records.split_off(fits));
        roomiest.extend(records.into_iter().map(|(_, record)| record));
    }
    left_over.sort_by_key(|(index, _)| *index);
    Round {
        batches: batches.into_iter().filter(|b| !b.is_empty()).collect(),
        left_over: left_over.into_iter().map(|(_, record)| record).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{OrderLine, OrderPlaced};
    use chrono::Utc;
    use uuid::Uuid;

    fn record(partition: i32, offset: i64, payload: Vec<u8>) -> InboundRecord {
        InboundRecord {
            topic: "t".into(),
            partition,
            offset,
            timestamp: None,
            key: None,
            payload: Some(payload),
            headers: vec![],
        }
    }

    fn event(id: Uuid) -> OrderPlaced {
        OrderPlaced {
            message_id: id,
            order_id: "O-1".into(),
            occurred_at: Utc::now(),
            lines: vec![OrderLine {
                sku: "S".into(),
                quantity: 1,
            }],
        }
    }

    fn today_window() -> DedupWindow {
        DedupWindow::new([Utc::now().date_naive()])
    }

    #[test]
    fn the_same_id_twice_in_a_batch_counts_once() {
        let id = Uuid::new_v4();
        let batch = Batch::classify(
            vec![
                record(0, 1, event(id).to_json()),
                record(3, 9, event(id).to_json()),
            ],
            &today_window(),
        );
        assert_eq!(batch.items()[0].disposition, Disposition::Candidate);
        assert_eq!(batch.items()[1].disposition, Disposition::RepeatInBatch);
        assert_eq!(batch.items()[1].message_id(), Some(id));
    }

    #[test]
    fn invalid_records_are_parked_with_their_reason() {
        let batch = Batch::classify(vec![record(0, 1, b"nope".to_vec())], &today_window());
        assert_eq!(
            park_reason(&batch.items()[0]),
            Some(ParkReason::MalformedJson)
        );
        assert_eq!(batch.items()[0].event(), None);
    }

    #[test]
    fn events_outside_the_window_are_parked() {
        let batch = Batch::classify(
            vec![record(0, 1, event(Uuid::new_v4()).to_json())],
            &DedupWindow::default(),
        );
        assert_eq!(
            park_reason(&batch.items()[0]),
            Some(ParkReason::OutsideDedupWindow)
        );
        assert_eq!(batch.items()[0].event(), None);
    }

    #[test]
    fn a_batch_judged_against_another_window_keeps_its_parse_and_offsets() {
        let id = Uuid::new_v4();
        let records = vec![
            record(0, 4, event(id).to_json()),
            record(0, 5, event(id).to_json()),
            record(1, 2, b"nope".to_vec()),
        ];
        let outside = Batch::classify(records, &DedupWindow::default());
        assert!(matches!(
            outside.in_window(&DedupWindow::default()),
            Cow::Borrowed(_)
        ));
        let inside = outside.in_window(&today_window());
        assert_eq!(inside.items()[0].disposition, Disposition::Candidate);
        assert_eq!(inside.items()[1].disposition, Disposition::RepeatInBatch);
        assert_eq!(
            park_reason(&inside.items()[2]),
            Some(ParkReason::MalformedJson)
        );
        assert_eq!(inside.items()[0].decoded, outside.items()[0].decoded);
        assert_eq!(inside.next_offsets(), outside.next_offsets());
        // And back: parked by the window again, the repeat no longer one.
        let again = inside.in_window(&DedupWindow::default());
        assert_eq!(*again, outside);
    }

    #[test]
    fn dropping_a_partition_drops_its_records_and_its_offset_only() {
        let mut batch = Batch::classify(
            vec![
                record(0, 5, vec![]),
                record(1, 7, vec![]),
                record(0, 6, vec![]),
            ],
            &today_window(),
        );
        batch.drop_partitions(&[("t".to_string(), 0)]);
        assert_eq!(batch.len(), 1);
        assert_eq!(
            batch.next_offsets().iter().collect::<Vec<_>>(),
            vec![(&("t".to_string(), 1), &8)]
        );
    }

    #[test]
    fn a_round_keeps_each_partition_in_one_batch_and_leaves_the_rest_in_order() {
        let records: Vec<_> = (0..50)
            .map(|i| record(i % 6, i64::from(i), vec![]))
            .collect();
        let split = round(records.clone(), 4, 10);
        assert_eq!(split.batches.len(), 4);
        let mut batch_of: BTreeMap<i32, usize> = BTreeMap::new();
        let mut taken: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for (index, batch) in split.batches.iter().enumerate() {
            assert!((1..=10).contains(&batch.len()));
            for r in batch {
                assert_eq!(*batch_of.entry(r.partition).or_insert(index), index);
                taken.entry(r.partition).or_default().push(r.offset);
            }
        }
        // Each partition: a prefix in this round, the rest left over, in
        // poll order, nothing lost.
        for (partition, offsets) in &taken {
            let all: Vec<i64> = records
                .iter()
                .filter(|r| r.partition == *partition)
                .map(|r| r.offset)
                .collect();
            assert_eq!(offsets[..], all[..offsets.len()]);
        }
        let left: Vec<i64> = split.left_over.iter().map(|r| r.offset).collect();
        assert!(left.windows(2).all(|w| w[0] < w[1]), "poll order");
        let placed: usize = split.batches.iter().map(Vec::len).sum();
        assert_eq!(placed + split.left_over.len(), 50);
        assert!(placed >= 38, "the lanes are filled: {placed}");
    }

    #[test]
    fn a_round_of_less_than_a_full_batch_takes_one_lane() {
        let records: Vec<_> = (0..30)
            .map(|i| record(i % 12, i64::from(i), vec![]))
            .collect();
        let split = round(records, 4, 100);
        assert_eq!(split.batches.len(), 1);
        assert_eq!(split.batches[0].len(), 30);
        assert!(split.left_over.is_empty());
        // 150 records of 12 partitions: two batches of 75, nothing left.
        let records: Vec<_> = (0..150)
            .map(|i| record(i % 12, i64::from(i), vec![]))
            .collect();
        let split = round(records, 4, 100);
        assert_eq!(split.batches.len(), 2);
        assert!(split.left_over.is_empty());
    }

    #[test]
    fn next_offsets_are_the_highest_offset_plus_one_per_partition() {
        let records = [
            record(0, 5, vec![]),
            record(1, 7, vec![]),
            record(0, 6, vec![]),
            record(1, 3, vec![]),
        ];
        let batch = Batch::classify(records.to_vec(), &today_window());
        let next = batch.next_offsets();
        assert_eq!(next[&("t".to_string(), 0)], 7);
        assert_eq!(next[&("t".to_string(), 1)], 8);
        // A part's are its own records'.
        let (first, second) = batch.whole().split_at(3);
        assert_eq!(first.next_offsets()[&("t".to_string(), 1)], 8);
        assert_eq!(first.next_offsets()[&("t".to_string(), 0)], 7);
        assert_eq!(
            second.next_offsets().iter().collect::<Vec<_>>(),
            vec![(&("t".to_string(), 1), &4)]
        );
    }
}
