//! A reference model of what the database must hold after any sequence of
//! batches: docs/design.md's rules ("The event", "The batch transaction",
//! "Outcomes", "The dedup window"), written record at a time, as simply as
//! they can be said, and independently of the service's batch statement
//! (nothing of `src/batch.rs`, `src/store/` or `sql/` is used).
//!
//! It does use the service's definition of the event: `event::decode` says
//! whether a record is a valid `OrderPlaced` (and which, or its parking
//! reason), and gives with it the fingerprint the ledger keeps. It is pure,
//! unit-tested and fuzzed on its own (docs/design.md#the-event); what the
//! model checks is what the store does with its answers.
//!
//! Record at a time: each record is judged against the tables as the records
//! before it left them, in the order the batches were applied and, within a
//! batch, in poll order. docs/design.md#the-batch-transaction promises that
//! the outcome "never depends on how records fall into batches", so a batch
//! is nothing but its records one after the other; a record whose id came
//! earlier in its batch is judged "as it would be in a later batch", which
//! here is simply how every record is judged.
//!
//! Where the design leaves a rule open, the statement (sql/apply_batch.sql
//! and its functions in migrations/) was read to learn what the rule is,
//! and the comment at the rule says so.

use std::collections::BTreeMap;
use std::fmt::Debug;

use chrono::{Days, NaiveDate};
use inventory_inbox::event::{self, Header, OrderPlaced};
use uuid::Uuid;

pub mod database;

/// Days after today that already have a ledger partition
/// (docs/design.md#the-dedup-window: the window is `[today − retention,
/// today + 2]`).
pub const DAYS_AHEAD: u64 = 2;

/// One record as the consumer polled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub payload: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// A ledger row (`processed_inbox`): one per applied event and consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    /// `event::Decoded::fingerprint` of the record that was applied.
    pub fingerprint: i64,
    pub event_day: NaiveDate,
    pub order_id: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Every order line of the event was reserved before (status `d`).
    pub business_duplicate: bool,
}

/// An order line (`order_reservation`): one per `(order_id, sku)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub quantity: i64,
    /// `reserved`, or `rejected` (the stock could not cover it).
    pub reserved: bool,
    /// The event that made the line.
    pub message_id: Uuid,
}

/// Everything the database must hold, keyed as the tables are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tables {
    /// `(consumer, message_id)` -> the row.
    pub ledger: BTreeMap<(String, Uuid), LedgerRow>,
    /// `(order_id, sku)` -> the line, whatever the consumer.
    pub reservations: BTreeMap<(String, String), Line>,
    /// `inventory_stock.reserved` per SKU.
    pub reserved: BTreeMap<String, i64>,
    /// `(consumer, topic, partition, offset)` -> the parking reason.
    pub parked: BTreeMap<(String, String, i32, i64), String>,
    /// `(consumer, topic, partition)` -> the next offset to read.
    pub positions: BTreeMap<(String, String, i32), i64>,
}

/// What one batch did, as the service counts it (docs/design.md#outcomes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Fresh events, business duplicates included.
    pub processed: u64,
    pub business_duplicates: u64,
    pub duplicates: u64,
    pub lines_reserved: u64,
    pub lines_rejected: u64,
    /// `(partition, offset, reason)` of the records parked now, not by an
    /// earlier delivery of the same position.
    pub newly_parked: Vec<(i32, i64, String)>,
}

/// The judgement of one record.
enum Outcome {
    /// Its id is in the ledger with its fingerprint: no effect.
    Duplicate,
    Parked(String),
    /// Applied: a ledger row and its order lines.
    Fresh(OrderPlaced, i64),
}

/// The tables of one database, fed record by record.
#[derive(Debug, Clone)]
pub struct Model {
    today: NaiveDate,
    retention_days: u64,
    /// `inventory_stock.on_hand`: the SKUs that exist and their stock.
    on_hand: BTreeMap<String, i64>,
    /// An order whose order lines the database refuses (a CHECK constraint
    /// of the test): what forces the store to split a batch.
    refused_order: Option<String>,
    tables: Tables,
}

impl Model {
    pub fn new(
        today: NaiveDate,
        retention_days: u64,
        on_hand: BTreeMap<String, i64>,
        refused_order: Option<String>,
    ) -> Model {
        let tables = Tables {
            reserved: on_hand.keys().map(|sku| (sku.clone(), 0)).collect(),
            ..Tables::default()
        };
        Model {
            today,
            retention_days,
            on_hand,
            refused_order,
            tables,
        }
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// One batch of `consumer`, its records in poll order.
    pub fn apply_batch(&mut self, consumer: &str, records: &[Record]) -> Counts {
        let mut counts = Counts::default();
        for record in records {
            self.apply_record(consumer, record, &mut counts);
        }
        counts
    }

    fn apply_record(&mut self, consumer: &str, record: &Record, counts: &mut Counts) {
        // docs/design.md#positions: the next offset, only forward, whatever
        // the record's outcome (duplicates and parked records never stall).
        let position = (consumer.to_owned(), record.topic.clone(), record.partition);
        let next = self.tables.positions.entry(position).or_insert(0);
        *next = (*next).max(record.offset + 1);
        match self.judge(consumer, record) {
            Outcome::Duplicate => counts.duplicates += 1,
            Outcome::Parked(reason) => self.park(consumer, record, reason, counts),
            Outcome::Fresh(order, fingerprint) => {
                self.apply_event(consumer, record, order, fingerprint, counts)
            }
        }
    }

    /// docs/design.md#the-batch-transaction, step 2, in its order: invalid,
    /// then outside the window, then the ledger (duplicate or conflict),
    /// then unknown SKUs; whatever is left is fresh.
    fn judge(&self, consumer: &str, record: &Record) -> Outcome {
        let event::Decoded {
            event: order,
            fingerprint,
        } = match event::decode(record.payload.as_deref(), &record.headers) {
            Ok(decoded) => decoded,
            Err(rejection) => return Outcome::Parked(rejection.reason.as_str().into()),
        };
        if let Some(reason) = self.outside_window(order.event_day()) {
            return Outcome::Parked(reason.into());
        }
        // The ledger is looked up by id on every day of the window, so an id
        // counts once whatever day its event names (docs/design.md#tables);
        // a record whose id came earlier in its batch is judged the same way
        // ("as it would be in a later batch").
        match self
            .tables
            .ledger
            .get(&(consumer.to_owned(), order.message_id))
        {
            Some(row) if row.fingerprint == fingerprint => return Outcome::Duplicate,
            Some(_) => return Outcome::Parked("event_id_conflict".into()),
            None => {}
        }
        // An unknown SKU parks the event, and its id does not reach the
        // ledger: the same id later is judged afresh.
        if order
            .lines
            .iter()
            .any(|l| !self.on_hand.contains_key(&l.sku))
        {
            return Outcome::Parked("unknown_sku".into());
        }
        // "When the database refuses a batch for a reason that belongs to a
        // record": the store splits the batch until the record is alone and
        // parks it `db_rejected`; here, the database refuses any new order
        // line of the refused order.
        if self.refused_order.as_deref() == Some(order.order_id.as_str())
            && !self.new_lines(&order).is_empty()
        {
            return Outcome::Parked("db_rejected".into());
        }
        Outcome::Fresh(order, fingerprint)
    }

    /// docs/design.md#the-dedup-window: a day without a ledger partition.
    fn outside_window(&self, day: NaiveDate) -> Option<&'static str> {
        let first = self.today - Days::new(self.retention_days);
        let last = self.today + Days::new(DAYS_AHEAD);
        if day > last {
            Some("event_time_in_future")
        } else if day < first {
            Some("outside_dedup_window")
        } else {
            None
        }
    }

    /// The event's order lines that have no reservation yet: a line
    /// reserved before is a business duplicate and reserves nothing
    /// (docs/design.md#the-batch-transaction, step 5). A `rejected` line
    /// counts as reserved before: the design does not say, the statement
    /// does (`reserved_before` reads every status; "not retried").
    fn new_lines<'a>(&self, order: &'a OrderPlaced) -> Vec<&'a event::OrderLine> {
        order
            .lines
            .iter()
            .filter(|line| {
                !self
                    .tables
                    .reservations
                    .contains_key(&(order.order_id.clone(), line.sku.clone()))
            })
            .collect()
    }

    /// A fresh event: its ledger row, then each new line first come, first
    /// served: reserved when the SKU's free stock covers it, else
    /// `rejected` and never retried (docs/design.md#the-batch-transaction,
    /// step 5). A rejected line does not stop the SKU's later lines: a
    /// smaller one may still fit (the design does not say;
    /// `inbox_first_come` in migrations/ does). An event with some lines
    /// new and some reserved before is `processed`, not a business
    /// duplicate, and reserves only the new ones.
    fn apply_event(
        &mut self,
        consumer: &str,
        record: &Record,
        order: OrderPlaced,
        fingerprint: i64,
        counts: &mut Counts,
    ) {
        let new_lines: Vec<(String, i64)> = self
            .new_lines(&order)
            .into_iter()
            .map(|line| (line.sku.clone(), i64::from(line.quantity)))
            .collect();
        // docs/design.md#outcomes: a business duplicate when every
        // `(order_id, sku)` is reserved already; still a ledger row.
        let business_duplicate = new_lines.is_empty();
        counts.processed += 1;
        counts.business_duplicates += u64::from(business_duplicate);
        let row = LedgerRow {
            fingerprint,
            event_day: order.event_day(),
            order_id: order.order_id.clone(),
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            business_duplicate,
        };
        self.tables
            .ledger
            .insert((consumer.to_owned(), order.message_id), row);
        for (sku, quantity) in new_lines {
            let reserved = self.tables.reserved.get_mut(&sku).expect("a known SKU");
            let fits = quantity <= self.on_hand[&sku] - *reserved;
            if fits {
                *reserved += quantity;
                counts.lines_reserved += 1;
            } else {
                counts.lines_rejected += 1;
            }
            let line = Line {
                quantity,
                reserved: fits,
                message_id: order.message_id,
            };
            self.tables
                .reservations
                .insert((order.order_id.clone(), sku), line);
        }
    }

    /// docs/design.md#outcomes: "parking is idempotent on the record's
    /// position": the first reason parked at a position stays, whatever a
    /// redelivery of it would be parked for now.
    fn park(&mut self, consumer: &str, record: &Record, reason: String, counts: &mut Counts) {
        let key = (
            consumer.to_owned(),
            record.topic.clone(),
            record.partition,
            record.offset,
        );
        if let std::collections::btree_map::Entry::Vacant(vacant) = self.tables.parked.entry(key) {
            counts
                .newly_parked
                .push((record.partition, record.offset, reason.clone()));
            vacant.insert(reason);
        }
    }
}

/// What differs between the model's tables and the database's, one line
/// per key: a row the other lacks, or a value that is not the same.
/// Every key whose value differs, one line each.
fn diff_map<K: Ord + Debug, V: PartialEq + Debug>(
    table: &str,
    model: &BTreeMap<K, V>,
    database: &BTreeMap<K, V>,
    out: &mut Vec<String>,
) {
    for (key, expected) in model {
        match database.get(key) {
            None => out.push(format!(
                "{table} {key:?}: model {expected:?}, database none"
            )),
            Some(found) if found != expected => out.push(format!(
                "{table} {key:?}: model {expected:?}, database {found:?}"
            )),
            Some(_) => {}
        }
    }
    for (key, found) in database {
        if !model.contains_key(key) {
            out.push(format!("{table} {key:?}: model none, database {found:?}"));
        }
    }
}

pub fn diff(model: &Tables, database: &Tables, out: &mut Vec<String>) {
    diff_map("ledger", &model.ledger, &database.ledger, out);
    diff_map(
        "order line",
        &model.reservations,
        &database.reservations,
        out,
    );
    diff_map("reserved", &model.reserved, &database.reserved, out);
    diff_map("parked", &model.parked, &database.parked, out);
    diff_map("position", &model.positions, &database.positions, out);
}
