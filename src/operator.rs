//! Operator actions that need both the database and the cluster, shared by
//! the CLI (`positions set`) and the console, so the two can never
//! disagree: a move of positions is planned first (every partition checked,
//! the records it re-reads or skips counted, nothing moved when one is
//! refused), then applied with [`crate::store::positions::set`]. A running
//! consumer reads a moved partition from there within 10 s (a batch of it
//! in flight is refused, not applied); a stopped one starts there.

use crate::config::OffsetTarget;
use crate::kafka::cluster::PartitionOffsets;
use crate::store::positions::{self, Position};
use crate::store::{DbPool, StoreError};

/// One partition's planned move.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedMove {
    pub partition: i32,
    /// The database's position now, if it has one.
    pub before: Option<i64>,
    /// Where it is moved; `None`: left as it is (the group has no committed
    /// offset to move it to).
    pub target: Option<i64>,
    /// Where the partition is read from now: the database's position, else
    /// the group's committed offset, else the log start (a new group reads
    /// from the earliest record).
    pub reads_from: i64,
}

impl PlannedMove {
    /// Records read again (already read) after the move.
    pub fn reread(&self) -> i64 {
        self.target
            .map_or(0, |target| (self.reads_from - target).max(0))
    }

    /// Records never read after the move.
    pub fn skipped(&self) -> i64 {
        self.target
            .map_or(0, |target| (target - self.reads_from).max(0))
    }
}

/// The moves of `positions set`: each chosen partition (every one of the
/// topic when `partitions` is empty) to `offset`, or to the group's
/// committed offset when `offset` is `None` (`--to-kafka`). Refused, with
/// one line saying why, when a named partition does not exist or the
/// offset is past a partition's end or before its log start.
pub fn plan_moves(
    topic: &str,
    offsets: &[PartitionOffsets],
    stored: &[Position],
    partitions: &[i32],
    offset: Option<OffsetTarget>,
) -> Result<Vec<PlannedMove>, String> {
    let chosen = chosen_partitions(topic, offsets, partitions, offset)?;
    Ok(chosen
        .into_iter()
        .map(|partition| {
            let before = stored
                .iter()
                .find(|p| p.topic == topic && p.partition == partition.partition)
                .map(|p| p.next_offset);
            let target = match offset {
                Some(OffsetTarget::At(at)) => Some(at),
                Some(OffsetTarget::Earliest) => Some(partition.earliest),
                Some(OffsetTarget::Latest) => Some(partition.end),
                None => partition.committed,
            };
            PlannedMove {
                partition: partition.partition,
                before,
                target,
                reads_from: before.or(partition.committed).unwrap_or(partition.earliest),
            }
        })
        .collect())
}

/// Applies planned moves; returns those moved (the others had no target).
pub async fn apply_moves(
    pool: &DbPool,
    consumer: &str,
    topic: &str,
    moves: &[PlannedMove],
) -> Result<Vec<PlannedMove>, StoreError> {
    let mut moved = Vec::new();
    for planned in moves {
        let Some(target) = planned.target else {
            continue;
        };
        let before = positions::set(pool, consumer, topic, planned.partition, target).await?;
        moved.push(PlannedMove {
            before,
            ..planned.clone()
        });
    }
    Ok(moved)
}

/// The partitions a move touches (all when none is named), once every
/// named one exists and no offset is past its partition's end (it would
/// skip records not produced yet) or before its log start (those records
/// are deleted: nothing could read them).
fn chosen_partitions<'a>(
    topic: &str,
    offsets: &'a [PartitionOffsets],
    partitions: &[i32],
    offset: Option<OffsetTarget>,
) -> Result<Vec<&'a PartitionOffsets>, String> {
    for wanted in partitions {
        if !offsets.iter().any(|o| o.partition == *wanted) {
            return Err(format!(
                "--partition {wanted}: {topic} has no such partition"
            ));
        }
    }
    let chosen: Vec<_> = offsets
        .iter()
        .filter(|o| partitions.is_empty() || partitions.contains(&o.partition))
        .collect();
    if let Some(OffsetTarget::At(at)) = offset {
        if let Some(partition) = chosen.iter().find(|o| at > o.end) {
            return Err(format!(
                "--offset {at} is past the end of partition {} ({}): nothing moved; `--offset latest` skips everything not read yet",
                partition.partition,
                partition.end
            ));
        }
        if let Some(partition) = chosen.iter().find(|o| at < o.earliest) {
            return Err(format!(
                "--offset {at} is before the earliest offset of partition {} ({}): retention deleted the records before it; nothing moved; `--offset earliest` reads from the first record the topic holds",
                partition.partition,
                partition.earliest
            ));
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(partition: i32, end: i64) -> PartitionOffsets {
        PartitionOffsets {
            partition,
            earliest: 0,
            end,
            committed: None,
        }
    }

    #[test]
    fn positions_set_moves_every_partition_unless_some_are_named() {
        let offsets = [partition(0, 10), partition(1, 20), partition(2, 30)];
        let all = chosen_partitions("orders", &offsets, &[], None).expect("all");
        assert_eq!(all.len(), 3);
        let named = chosen_partitions("orders", &offsets, &[2, 0], None).expect("named");
        let numbers: Vec<i32> = named.iter().map(|o| o.partition).collect();
        assert_eq!(numbers, vec![0, 2]);
    }

    #[test]
    fn positions_set_refuses_an_offset_before_the_log_start() {
        let offsets = [PartitionOffsets {
            partition: 3,
            earliest: 5,
            end: 30,
            committed: None,
        }];
        let below =
            chosen_partitions("orders", &offsets, &[3], Some(OffsetTarget::At(2))).unwrap_err();
        assert!(
            below.starts_with("--offset 2 is before the earliest offset of partition 3 (5)"),
            "{below}"
        );
        let at_start = chosen_partitions("orders", &offsets, &[3], Some(OffsetTarget::At(5)));
        assert_eq!(at_start.expect("at the log start").len(), 1);
    }

    #[test]
    fn positions_set_refuses_an_unknown_partition_or_an_offset_past_the_end() {
        let offsets = [partition(0, 10), partition(1, 20)];
        let unknown = chosen_partitions("orders", &offsets, &[7], None).unwrap_err();
        assert_eq!(unknown, "--partition 7: orders has no such partition");
        let past =
            chosen_partitions("orders", &offsets, &[], Some(OffsetTarget::At(15))).unwrap_err();
        assert!(
            past.starts_with("--offset 15 is past the end of partition 0 (10)"),
            "{past}"
        );
        // Past partition 0's end, but only partition 1 is moved.
        let fits = chosen_partitions("orders", &offsets, &[1], Some(OffsetTarget::At(15)));
        assert_eq!(fits.expect("fits").len(), 1);
    }

    #[test]
    fn a_move_counts_the_records_it_rereads_or_skips_from_where_the_partition_is_read() {
        let offsets = [
            PartitionOffsets {
                partition: 0,
                earliest: 2,
                end: 50,
                committed: Some(40),
            },
            partition(1, 20),
        ];
        let stored = [Position {
            topic: "orders".into(),
            partition: 0,
            next_offset: 30,
            updated_at: chrono::Utc::now(),
        }];
        let rewind = plan_moves(
            "orders",
            &offsets,
            &stored,
            &[],
            Some(OffsetTarget::Earliest),
        )
        .expect("planned");
        // Partition 0 is read from the database's 30, not Kafka's 40.
        assert_eq!((rewind[0].reread(), rewind[0].skipped()), (28, 0));
        // Partition 1 has neither: read from its log start already.
        assert_eq!((rewind[1].reread(), rewind[1].skipped()), (0, 0));
        let skip = plan_moves(
            "orders",
            &offsets,
            &stored,
            &[0],
            Some(OffsetTarget::Latest),
        )
        .expect("planned");
        assert_eq!((skip[0].reread(), skip[0].skipped()), (0, 20));
        let to_kafka = plan_moves("orders", &offsets, &stored, &[], None).expect("planned");
        assert_eq!(to_kafka[0].target, Some(40));
        assert_eq!(to_kafka[1].target, None, "no committed offset: left alone");
    }
}
