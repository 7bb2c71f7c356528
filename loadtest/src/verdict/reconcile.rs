//! Reconciliation, pure: what was sent (the manifest) against what the
//! database shows (two snapshots and the run's ledger rows). The database
//! probe ([`crate::probes::database`]) fills these plain types; nothing here
//! reads anything.
//!
//! Exactly once means: every SKU's `reserved` grew by the sum over the unique
//! orders sent (each order id is sent by one event, so there is no business
//! duplicate to discount), the ledger grew by one row per unique event, and
//! the parked rows by one per poison record. `lost_events` are valid events
//! without a ledger row; `doubled_events` counts ledger rows beyond one per
//! id (the primary key forbids them) plus the SKUs whose reservation grew by
//! more than was ordered, the visible trace of an event applied twice.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Counters of this consumer at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// `reserved` per seeded SKU.
    pub reserved: HashMap<String, i64>,
    pub ledger_rows: i64,
    /// Parked rows of this consumer and topic, per reason.
    pub parked: HashMap<String, i64>,
}

impl Snapshot {
    pub fn parked_rows(&self) -> i64 {
        self.parked.values().sum()
    }
}

/// One ledger row of an event this run sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedRow {
    pub message_id: Uuid,
    pub processed_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    pub ok: bool,
    /// SKUs whose `reserved` delta differs from the ordered quantity.
    pub mismatched_skus: u64,
    /// SKUs that reserved more than ordered (part of `doubled_events`).
    pub over_reserved_skus: u64,
    pub lost_events: u64,
    pub doubled_events: u64,
    pub ledger_rows_delta: i64,
    pub expected_ledger_rows: i64,
    pub parked_rows_delta: i64,
    pub expected_parked_rows: i64,
    /// Per reason code: (parked, sent), only where the two differ. A record
    /// parked for another reason than intended is reported, not failed: the
    /// stock and the ledger are still right.
    pub parked_reason_differences: BTreeMap<String, (i64, i64)>,
}

/// What was sent, as reconciliation needs it.
pub struct Sent<'a> {
    pub unique_ids: &'a [Uuid],
    pub expected_reserved: &'a HashMap<String, i64>,
    pub poison: &'a BTreeMap<&'static str, u64>,
}

pub fn reconcile(
    sent: &Sent<'_>,
    before: &Snapshot,
    after: &Snapshot,
    applied: &[AppliedRow],
) -> Reconciliation {
    let (mut mismatched_skus, mut over_reserved_skus) = (0, 0);
    let skus: HashSet<&String> = after
        .reserved
        .keys()
        .chain(sent.expected_reserved.keys())
        .collect();
    for sku in skus {
        let delta = after.reserved.get(sku).copied().unwrap_or(0)
            - before.reserved.get(sku).copied().unwrap_or(0);
        let expected = sent.expected_reserved.get(sku).copied().unwrap_or(0);
        if delta != expected {
            mismatched_skus += 1;
        }
        if delta > expected {
            over_reserved_skus += 1;
        }
    }

    let wanted: HashSet<Uuid> = sent.unique_ids.iter().copied().collect();
    let mut found = HashSet::with_capacity(applied.len());
    let mut extra_rows = 0u64;
    for row in applied.iter().filter(|r| wanted.contains(&r.message_id)) {
        if !found.insert(row.message_id) {
            extra_rows += 1;
        }
    }
    let lost_events = (wanted.len() - found.len()) as u64;
    let doubled_events = extra_rows + over_reserved_skus;

    let mut parked_reason_differences = BTreeMap::new();
    let reasons: HashSet<&str> = after
        .parked
        .keys()
        .map(String::as_str)
        .chain(sent.poison.keys().copied())
        .collect();
    for reason in reasons {
        let parked = after.parked.get(reason).copied().unwrap_or(0)
            - before.parked.get(reason).copied().unwrap_or(0);
        let expected = sent.poison.get(reason).copied().unwrap_or(0) as i64;
        if parked != expected {
            parked_reason_differences.insert(reason.to_owned(), (parked, expected));
        }
    }

    let ledger_rows_delta = after.ledger_rows - before.ledger_rows;
    let expected_ledger_rows = wanted.len() as i64;
    let parked_rows_delta = after.parked_rows() - before.parked_rows();
    let expected_parked_rows = sent.poison.values().sum::<u64>() as i64;
    Reconciliation {
        ok: mismatched_skus == 0
            && lost_events == 0
            && doubled_events == 0
            && ledger_rows_delta == expected_ledger_rows
            && parked_rows_delta == expected_parked_rows,
        mismatched_skus,
        over_reserved_skus,
        lost_events,
        doubled_events,
        ledger_rows_delta,
        expected_ledger_rows,
        parked_rows_delta,
        expected_parked_rows,
        parked_reason_differences,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn row(n: u128) -> AppliedRow {
        AppliedRow {
            message_id: id(n),
            processed_at: Utc::now(),
        }
    }

    fn snapshot(reserved: &[(&str, i64)], ledger_rows: i64, parked: &[(&str, i64)]) -> Snapshot {
        Snapshot {
            reserved: reserved.iter().map(|(s, r)| (s.to_string(), *r)).collect(),
            ledger_rows,
            parked: parked.iter().map(|(s, r)| (s.to_string(), *r)).collect(),
        }
    }

    struct Case {
        ids: Vec<Uuid>,
        expected: HashMap<String, i64>,
        poison: BTreeMap<&'static str, u64>,
    }

    impl Case {
        fn new() -> Case {
            Case {
                ids: vec![id(1), id(2), id(3)],
                expected: [("A".to_string(), 5), ("B".to_string(), 2)].into(),
                poison: [("malformed_json", 1), ("unknown_sku", 1)].into(),
            }
        }

        fn run(&self, after: &Snapshot, applied: &[AppliedRow]) -> Reconciliation {
            let sent = Sent {
                unique_ids: &self.ids,
                expected_reserved: &self.expected,
                poison: &self.poison,
            };
            // Deltas, not absolute values: the database had earlier runs.
            let before = snapshot(&[("A", 10), ("B", 0), ("C", 7)], 100, &[("unknown_sku", 4)]);
            reconcile(&sent, &before, after, applied)
        }
    }

    #[test]
    fn exact_deltas_reconcile() {
        let after = snapshot(
            &[("A", 15), ("B", 2), ("C", 7)],
            103,
            &[("unknown_sku", 5), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3)]);
        assert!(result.ok, "{result:?}");
        assert_eq!(result.mismatched_skus, 0);
        assert!(result.parked_reason_differences.is_empty());
    }

    #[test]
    fn a_missing_ledger_row_is_a_lost_event() {
        let after = snapshot(
            &[("A", 13), ("B", 2), ("C", 7)],
            102,
            &[("unknown_sku", 5), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(3)]);
        assert!(!result.ok);
        assert_eq!(result.lost_events, 1);
        assert_eq!(result.mismatched_skus, 1);
        assert_eq!(result.doubled_events, 0);
    }

    #[test]
    fn over_reservation_is_a_doubled_event() {
        let after = snapshot(
            &[("A", 20), ("B", 2), ("C", 8)],
            103,
            &[("unknown_sku", 5), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3)]);
        assert!(!result.ok);
        assert_eq!(result.mismatched_skus, 2);
        assert_eq!(result.over_reserved_skus, 2);
        assert_eq!(result.doubled_events, 2);
    }

    #[test]
    fn a_second_ledger_row_of_one_event_is_a_doubled_event() {
        let after = snapshot(
            &[("A", 15), ("B", 2), ("C", 7)],
            104,
            &[("unknown_sku", 5), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3), row(2)]);
        assert!(!result.ok);
        assert_eq!(result.doubled_events, 1);
        assert_eq!(result.lost_events, 0);
    }

    #[test]
    fn ledger_rows_of_events_not_sent_are_not_counted() {
        let after = snapshot(
            &[("A", 15), ("B", 2), ("C", 7)],
            103,
            &[("unknown_sku", 5), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3), row(9), row(9)]);
        assert!(result.ok, "{result:?}");
        assert_eq!(result.doubled_events, 0);
    }

    #[test]
    fn a_parking_reason_difference_is_reported_but_not_failed() {
        let after = snapshot(
            &[("A", 15), ("B", 2), ("C", 7)],
            103,
            &[
                ("unknown_sku", 4),
                ("malformed_json", 1),
                ("invalid_field", 1),
            ],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3)]);
        assert!(result.ok);
        assert_eq!(result.parked_reason_differences["unknown_sku"], (0, 1));
        assert_eq!(result.parked_reason_differences["invalid_field"], (1, 0));
    }

    #[test]
    fn poison_applied_instead_of_parked_fails() {
        let after = snapshot(
            &[("A", 15), ("B", 2), ("C", 7)],
            104,
            &[("unknown_sku", 4), ("malformed_json", 1)],
        );
        let result = Case::new().run(&after, &[row(1), row(2), row(3)]);
        assert!(!result.ok);
        assert_eq!(result.ledger_rows_delta, 4);
        assert_eq!(result.parked_rows_delta, 1);
    }
}
