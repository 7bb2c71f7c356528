//! Allocation arithmetic, pure: which order lines a batch reserves.
//!
//! Allocation is first-come in batch order (offset order within a partition):
//! a line is `reserved` when the SKU's available stock (`on_hand - reserved`,
//! read under a row lock) covers it, else `rejected`, and a rejected line
//! reserves nothing and is never retried. A `(order_id, sku)` that already has
//! a reservation row, or that an earlier event of the same batch claimed, is a
//! business duplicate and is not allocated again.

use std::collections::{BTreeMap, HashMap, HashSet};

use uuid::Uuid;

use crate::event::OrderPlaced;

/// The business key of a reservation.
pub type ReservationKey = (String, String);

/// Outcome of one order line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineStatus {
    Reserved,
    Rejected,
}

impl LineStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LineStatus::Reserved => "reserved",
            LineStatus::Rejected => "rejected",
        }
    }
}

/// A row for `order_reservation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationLine {
    pub order_id: String,
    pub sku: String,
    pub quantity: i32,
    pub status: LineStatus,
    pub message_id: Uuid,
}

/// For each event, whether it is a business duplicate: every one of its
/// `(order_id, sku)` pairs is already reserved or claimed by an earlier event
/// of the batch.
pub fn business_duplicates(
    events: &[&OrderPlaced],
    existing: &HashSet<ReservationKey>,
) -> Vec<bool> {
    let mut claimed: HashSet<ReservationKey> = HashSet::new();
    events
        .iter()
        .map(|event| {
            let mut all_known = true;
            for line in &event.lines {
                let key = (event.order_id.clone(), line.sku.clone());
                if !existing.contains(&key) && !claimed.contains(&key) {
                    all_known = false;
                }
                claimed.insert(key);
            }
            all_known
        })
        .collect()
}

/// Allocates the new lines of the fresh events, in order, against `available`
/// (SKU -> on_hand - reserved), which it decrements for every reserved line.
pub fn allocate(
    fresh: &[&OrderPlaced],
    existing: &HashSet<ReservationKey>,
    available: &mut HashMap<String, i64>,
) -> Vec<ReservationLine> {
    let mut claimed: HashSet<ReservationKey> = HashSet::new();
    let mut lines = Vec::new();
    for event in fresh {
        for line in &event.lines {
            let key = (event.order_id.clone(), line.sku.clone());
            if existing.contains(&key) || !claimed.insert(key) {
                continue;
            }
            let stock = available.entry(line.sku.clone()).or_insert(0);
            let status = if *stock >= i64::from(line.quantity) {
                *stock -= i64::from(line.quantity);
                LineStatus::Reserved
            } else {
                LineStatus::Rejected
            };
            lines.push(ReservationLine {
                order_id: event.order_id.clone(),
                sku: line.sku.clone(),
                quantity: line.quantity,
                status,
                message_id: event.message_id,
            });
        }
    }
    lines
}

/// Sums reserved quantities per SKU, sorted by SKU: the input of the one
/// aggregated stock UPDATE of a batch.
pub fn stock_deltas<'a>(
    reserved: impl IntoIterator<Item = (&'a str, i64)>,
) -> (Vec<String>, Vec<i64>) {
    let mut per_sku: BTreeMap<&str, i64> = BTreeMap::new();
    for (sku, quantity) in reserved {
        *per_sku.entry(sku).or_insert(0) += quantity;
    }
    per_sku
        .into_iter()
        .map(|(sku, q)| (sku.to_owned(), q))
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::OrderLine;
    use chrono::Utc;

    fn order(id: &str, lines: &[(&str, i32)]) -> OrderPlaced {
        OrderPlaced {
            message_id: Uuid::new_v4(),
            order_id: id.into(),
            occurred_at: Utc::now(),
            lines: lines
                .iter()
                .map(|(sku, quantity)| OrderLine {
                    sku: (*sku).into(),
                    quantity: *quantity,
                })
                .collect(),
        }
    }

    fn key(order: &str, sku: &str) -> ReservationKey {
        (order.into(), sku.into())
    }

    #[test]
    fn first_come_wins_and_a_line_that_does_not_fit_is_rejected() {
        let a = order("A", &[("S", 6)]);
        let b = order("B", &[("S", 5)]);
        let c = order("C", &[("S", 4)]);
        let mut available = HashMap::from([("S".to_string(), 10)]);
        let lines = allocate(&[&a, &b, &c], &HashSet::new(), &mut available);
        let statuses: Vec<_> = lines
            .iter()
            .map(|l| (l.order_id.as_str(), l.status))
            .collect();
        assert_eq!(
            statuses,
            [
                ("A", LineStatus::Reserved),
                ("B", LineStatus::Rejected),
                ("C", LineStatus::Reserved)
            ]
        );
        assert_eq!(available["S"], 0);
    }

    #[test]
    fn already_reserved_pairs_are_not_allocated_again() {
        let a = order("A", &[("S", 1), ("T", 1)]);
        let existing = HashSet::from([key("A", "S")]);
        let mut available = HashMap::from([("S".to_string(), 5), ("T".to_string(), 5)]);
        let lines = allocate(&[&a], &existing, &mut available);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].sku, "T");
        assert_eq!(available["S"], 5);
    }

    #[test]
    fn a_second_event_for_the_same_order_line_in_a_batch_reserves_nothing() {
        let first = order("A", &[("S", 2)]);
        let second = order("A", &[("S", 3)]);
        let mut available = HashMap::from([("S".to_string(), 10)]);
        let lines = allocate(&[&first, &second], &HashSet::new(), &mut available);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].quantity, 2);
        assert_eq!(
            business_duplicates(&[&first, &second], &HashSet::new()),
            [false, true]
        );
    }

    #[test]
    fn partly_known_orders_are_not_business_duplicates() {
        let a = order("A", &[("S", 1), ("T", 1)]);
        let existing = HashSet::from([key("A", "S")]);
        assert_eq!(business_duplicates(&[&a], &existing), [false]);
        let existing = HashSet::from([key("A", "S"), key("A", "T")]);
        assert_eq!(business_duplicates(&[&a], &existing), [true]);
    }

    #[test]
    fn deltas_are_summed_per_sku_in_sku_order() {
        let (skus, quantities) = stock_deltas([("B", 2), ("A", 1), ("B", 3)]);
        assert_eq!(skus, ["A", "B"]);
        assert_eq!(quantities, [1, 5]);
    }
}
