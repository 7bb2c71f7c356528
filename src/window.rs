//! The dedup window (docs/design.md#the-dedup-window), pure: the set of event days that have a
//! `processed_inbox` partition. An event outside it is parked, never applied,
//! because its duplicate could no longer be recognised.

use std::collections::BTreeSet;

use chrono::NaiveDate;

use crate::event::ParkReason;

/// Days with a ledger partition, as last read from the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DedupWindow {
    days: BTreeSet<NaiveDate>,
}

impl DedupWindow {
    pub fn new(days: impl IntoIterator<Item = NaiveDate>) -> Self {
        DedupWindow {
            days: days.into_iter().collect(),
        }
    }

    /// `None` when the day has a partition; otherwise why the event is parked.
    /// Days past the newest partition are in the future; days before the
    /// oldest, or in a gap, can no longer be deduplicated.
    pub fn check(&self, day: NaiveDate) -> Option<ParkReason> {
        if self.days.contains(&day) {
            None
        } else if self.days.last().is_some_and(|last| day > *last) {
            Some(ParkReason::EventTimeInFuture)
        } else {
            Some(ParkReason::OutsideDedupWindow)
        }
    }

    pub fn first(&self) -> Option<NaiveDate> {
        self.days.first().copied()
    }

    pub fn last(&self) -> Option<NaiveDate> {
        self.days.last().copied()
    }

    pub fn len(&self) -> usize {
        self.days.len()
    }

    pub fn is_empty(&self) -> bool {
        self.days.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, d).unwrap()
    }

    #[test]
    fn days_with_a_partition_are_inside() {
        let window = DedupWindow::new([day(1), day(2), day(3)]);
        assert_eq!(window.check(day(1)), None);
        assert_eq!(window.check(day(3)), None);
    }

    #[test]
    fn days_after_the_last_partition_are_in_the_future() {
        let window = DedupWindow::new([day(1), day(2)]);
        assert_eq!(window.check(day(3)), Some(ParkReason::EventTimeInFuture));
    }

    #[test]
    fn days_before_the_first_partition_or_in_a_gap_are_outside() {
        let window = DedupWindow::new([day(2), day(4)]);
        assert_eq!(window.check(day(1)), Some(ParkReason::OutsideDedupWindow));
        assert_eq!(window.check(day(3)), Some(ParkReason::OutsideDedupWindow));
    }

    #[test]
    fn an_empty_window_accepts_nothing() {
        let window = DedupWindow::default();
        assert_eq!(window.check(day(1)), Some(ParkReason::OutsideDedupWindow));
    }
}
