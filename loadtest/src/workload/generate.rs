//! The event mix, pure: which record the generator sends next, and the
//! bookkeeping of what was sent ([`Manifest`]) that reconciliation compares
//! the database against.
//!
//! Every event is built with the service's own [`OrderPlaced`] and its
//! `to_json()`, so the generator can never drift from the schema the consumer
//! decodes; poison records are valid events broken in exactly one way.
//!
//! The mix is deterministic in its proportions (counted, not a coin toss): over `n` sends, `n × duplicate_ratio` are re-sends of an earlier
//! record and `n × poison_ratio` are poison, give or take one, spread evenly.
//! Order ids carry a per-run tag, so runs sharing a database never collide on
//! the business key `(order_id, sku)`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use chrono::{DateTime, Duration, DurationRound, Utc};
use inventory_inbox::event::{OrderLine, OrderPlaced, ParkReason, HEADER_CE_ID, MAX_PAYLOAD_BYTES};
use rand::rngs::StdRng;
use rand::Rng;
use uuid::Uuid;

/// The reasons the generator produces, round-robin: every code of docs/design.md#outcomes
/// that a record can carry by itself. `event_id_conflict` (an id reused for
/// another payload) depends on which copy the consumer sees first and
/// `db_rejected` on the database refusing a valid-looking record, so neither
/// can be produced with a predictable outcome.
pub const POISON_REASONS: &[ParkReason] = ParkReason::ALL.split_at(12).0;

/// How old an `outside_dedup_window` event is: well past the 14-day window.
const OUTSIDE_WINDOW_AGE_DAYS: i64 = 30;
/// How far ahead an `event_time_in_future` event is: past the 2 premade days.
const FUTURE_DAYS: i64 = 5;
/// Most lines of a generated order (the event allows 100; real carts are small).
const MAX_LINES_PER_ORDER: usize = 5;
/// Largest quantity of a generated line.
const MAX_QUANTITY_PER_LINE: i32 = 5;
/// How many recent valid records a duplicate may be drawn from.
const RECENT_CAPACITY: usize = 10_000;

/// The shape of the traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct MixConfig {
    /// Fraction of sends that re-send an earlier valid record unchanged.
    pub duplicate_ratio: f64,
    /// Fraction of sends that are poison (parked by the consumer).
    pub poison_ratio: f64,
    /// Seeded SKUs, named by [`sku_name`].
    pub skus: usize,
    /// The first `hot_skus` SKUs receive `hot_share` of the lines.
    pub hot_skus: usize,
    /// Probability that a line goes to a hot SKU.
    pub hot_share: f64,
    /// Days added to every event time (the simulated days of a soak); the
    /// end-to-end latency is still measured from the send.
    pub event_day_offset: i64,
}

impl MixConfig {
    /// Checks the ratios and counts; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, ratio) in [
            ("--duplicate-ratio", self.duplicate_ratio),
            ("--poison-ratio", self.poison_ratio),
            ("--hot-share", self.hot_share),
        ] {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(format!("{flag} must be within 0..=1, not {ratio}"));
            }
        }
        if self.duplicate_ratio + self.poison_ratio >= 1.0 {
            return Err("--duplicate-ratio + --poison-ratio must be below 1".into());
        }
        if self.skus == 0 {
            return Err("--skus must be at least 1".into());
        }
        if self.hot_skus > self.skus {
            return Err(format!(
                "--hot-skus ({}) cannot exceed --skus ({})",
                self.hot_skus, self.skus
            ));
        }
        Ok(())
    }

    /// Every SKU the run seeds.
    pub fn sku_names(&self) -> Vec<String> {
        (0..self.skus).map(sku_name).collect()
    }
}

/// Name of the `index`-th seeded SKU.
pub fn sku_name(index: usize) -> String {
    format!("LG-SKU-{index:05}")
}

/// A Kafka record as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The order id: every record of an order lands on the same partition.
    pub key: String,
    pub payload: Vec<u8>,
    pub headers: Vec<(String, String)>,
}

/// What the generator decided to send next.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// A new valid event: one ledger row and its reservations.
    Fresh {
        record: Record,
        event: OrderPlaced,
        /// When it was sent: the start of its end-to-end latency.
        sent_at: DateTime<Utc>,
    },
    /// An earlier valid record sent again, byte for byte: no effect.
    Duplicate { record: Record, message_id: Uuid },
    /// A record the consumer must park for `reason`.
    Poison { record: Record, reason: ParkReason },
}

impl Planned {
    pub fn record(&self) -> &Record {
        match self {
            Planned::Fresh { record, .. }
            | Planned::Duplicate { record, .. }
            | Planned::Poison { record, .. } => record,
        }
    }
}

/// Draws the next record of the mix.
pub struct Generator {
    config: MixConfig,
    rng: StdRng,
    /// Unique per run, part of every order id and of the unknown SKU.
    run_tag: String,
    /// Orders numbered from 1, poison included, so order ids never repeat.
    sequence: u64,
    /// Records drawn, duplicates and poison among them: the mix is kept at
    /// `floor(drawn × ratio)` of each, computed afresh (no float drift).
    drawn: u64,
    duplicates: u64,
    poisoned: u64,
    /// Index into [`POISON_REASONS`] of the next poison record.
    next_poison: usize,
    /// Recent valid records, the pool duplicates are drawn from.
    recent: VecDeque<(Record, Uuid)>,
}

impl Generator {
    pub fn new(config: MixConfig, rng: StdRng, run_tag: impl Into<String>) -> Self {
        Generator {
            config,
            rng,
            run_tag: run_tag.into(),
            sequence: 0,
            drawn: 0,
            duplicates: 0,
            poisoned: 0,
            next_poison: 0,
            recent: VecDeque::with_capacity(RECENT_CAPACITY),
        }
    }

    /// The next record; `now` becomes its event time (milliseconds, as sent).
    pub fn next(&mut self, now: DateTime<Utc>) -> Planned {
        self.drawn += 1;
        if self.poisoned < due(self.drawn, self.config.poison_ratio) {
            self.poisoned += 1;
            return self.poison(now);
        }
        // Without an earlier record the duplicate waits for a later send.
        if self.duplicates < due(self.drawn, self.config.duplicate_ratio) && !self.recent.is_empty()
        {
            self.duplicates += 1;
            let index = self.rng.gen_range(0..self.recent.len());
            let (record, message_id) = self.recent[index].clone();
            return Planned::Duplicate { record, message_id };
        }
        let event = self.order(now);
        let record = Record {
            key: event.order_id.clone(),
            payload: event.to_json(),
            headers: vec![(HEADER_CE_ID.into(), event.message_id.to_string())],
        };
        if self.recent.len() == RECENT_CAPACITY {
            self.recent.pop_front();
        }
        self.recent.push_back((record.clone(), event.message_id));
        Planned::Fresh {
            record,
            event,
            sent_at: to_millis(now),
        }
    }

    /// A valid order of 1-5 distinct SKUs, about `hot_share` of its lines on
    /// the hot SKUs.
    fn order(&mut self, now: DateTime<Utc>) -> OrderPlaced {
        self.sequence += 1;
        let count = self
            .rng
            .gen_range(1..=MAX_LINES_PER_ORDER)
            .min(self.config.skus);
        let mut chosen: Vec<usize> = Vec::with_capacity(count);
        while chosen.len() < count {
            let hot = self.config.hot_skus > 0 && self.rng.gen_bool(self.config.hot_share);
            let mut index = if hot {
                self.rng.gen_range(0..self.config.hot_skus)
            } else {
                self.rng.gen_range(0..self.config.skus)
            };
            // A hot SKU already in the order: any SKU instead, so the loop
            // always ends even when there are fewer hot SKUs than lines.
            if chosen.contains(&index) {
                index = self.rng.gen_range(0..self.config.skus);
            }
            if !chosen.contains(&index) {
                chosen.push(index);
            }
        }
        OrderPlaced {
            message_id: uuid::Builder::from_random_bytes(self.rng.gen()).into_uuid(),
            order_id: format!("LG-{}-{}", self.run_tag, self.sequence),
            occurred_at: to_millis(now + Duration::days(self.config.event_day_offset)),
            lines: chosen
                .into_iter()
                .map(|index| OrderLine {
                    sku: sku_name(index),
                    quantity: self.rng.gen_range(1..=MAX_QUANTITY_PER_LINE),
                })
                .collect(),
        }
    }

    /// A valid order broken in exactly the way `reason` names.
    fn poison(&mut self, now: DateTime<Utc>) -> Planned {
        let reason = POISON_REASONS[self.next_poison % POISON_REASONS.len()];
        self.next_poison += 1;
        let mut event = self.order(now);
        let mut headers = Vec::new();
        let payload = match reason {
            ParkReason::MalformedJson => {
                let mut bytes = event.to_json();
                bytes.truncate(bytes.len() / 2);
                bytes
            }
            ParkReason::EventIdMismatch => {
                let other = uuid::Builder::from_random_bytes(self.rng.gen()).into_uuid();
                headers.push((HEADER_CE_ID.to_owned(), other.to_string()));
                event.to_json()
            }
            ParkReason::UnknownSku => {
                event.lines.push(OrderLine {
                    sku: format!("LG-NOSKU-{}", self.run_tag),
                    quantity: 1,
                });
                event.to_json()
            }
            ParkReason::OutsideDedupWindow => {
                event.occurred_at -= Duration::days(OUTSIDE_WINDOW_AGE_DAYS);
                event.to_json()
            }
            ParkReason::EventTimeInFuture => {
                event.occurred_at += Duration::days(FUTURE_DAYS);
                event.to_json()
            }
            _ => mutated_json(&event, reason),
        };
        Planned::Poison {
            record: Record {
                key: event.order_id,
                payload,
                headers,
            },
            reason,
        }
    }
}

/// How many of `drawn` records should be of a kind sent at `ratio`.
fn due(drawn: u64, ratio: f64) -> u64 {
    // The epsilon keeps 0.1 × 1200 at 120, not 119.99….
    (drawn as f64 * ratio + 1e-9).floor() as u64
}

/// The event's JSON with one field removed or made invalid for `reason`.
fn mutated_json(event: &OrderPlaced, reason: ParkReason) -> Vec<u8> {
    let mut value: serde_json::Value =
        serde_json::from_slice(&event.to_json()).expect("to_json is valid JSON");
    let object = value.as_object_mut().expect("to_json is an object");
    match reason {
        ParkReason::MissingEventId => {
            object.remove("event_id");
        }
        ParkReason::InvalidEventId => {
            object.insert("event_id".into(), "not-a-uuid".into());
        }
        ParkReason::MissingEventTime => {
            object.remove("occurred_at");
        }
        ParkReason::UnsupportedEventType => {
            object.insert("event_type".into(), "OrderCancelled".into());
        }
        ParkReason::UnsupportedSchemaVersion => {
            object.insert("schema_version".into(), 2.into());
        }
        ParkReason::InvalidField => {
            object["lines"][0]["quantity"] = 0.into();
        }
        ParkReason::PayloadTooLarge => {
            object.insert("padding".into(), "x".repeat(MAX_PAYLOAD_BYTES).into());
        }
        other => unreachable!("{other} is not a JSON mutation"),
    }
    serde_json::to_vec(&value).expect("a JSON value always serialises")
}

/// Event times are sent with millisecond precision; latency is measured from
/// exactly the instant that was sent.
pub fn to_millis(time: DateTime<Utc>) -> DateTime<Utc> {
    time.duration_trunc(Duration::milliseconds(1))
        .expect("a millisecond always divides a timestamp")
}

/// A valid event that was sent: the ledger must hold exactly one row for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentEvent {
    pub message_id: Uuid,
    /// When it was sent (its `occurred_at`, less any event-day offset): the
    /// start of its end-to-end latency.
    pub sent_at: DateTime<Utc>,
}

/// Everything that was sent, as reconciliation needs it.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    /// The unique valid events, in send order.
    pub fresh: Vec<SentEvent>,
    /// Sum of quantities per SKU over the unique valid orders.
    pub expected_reserved: HashMap<String, i64>,
    pub duplicates: u64,
    /// Poison records per reason code.
    pub poison: BTreeMap<&'static str, u64>,
}

impl Manifest {
    pub fn record(&mut self, planned: &Planned) {
        match planned {
            Planned::Fresh { event, sent_at, .. } => {
                self.fresh.push(SentEvent {
                    message_id: event.message_id,
                    sent_at: *sent_at,
                });
                for line in &event.lines {
                    *self.expected_reserved.entry(line.sku.clone()).or_default() +=
                        i64::from(line.quantity);
                }
            }
            Planned::Duplicate { .. } => self.duplicates += 1,
            Planned::Poison { reason, .. } => *self.poison.entry(reason.as_str()).or_default() += 1,
        }
    }

    pub fn unique_events(&self) -> u64 {
        self.fresh.len() as u64
    }

    pub fn poison_sent(&self) -> u64 {
        self.poison.values().sum()
    }

    pub fn events_sent(&self) -> u64 {
        self.unique_events() + self.duplicates + self.poison_sent()
    }

    /// When each valid event was sent, by id.
    pub fn send_times(&self) -> HashMap<Uuid, DateTime<Utc>> {
        self.fresh
            .iter()
            .map(|e| (e.message_id, e.sent_at))
            .collect()
    }

    /// The valid events' ids, for the ledger queries.
    pub fn fresh_ids(&self) -> Vec<Uuid> {
        self.fresh.iter().map(|e| e.message_id).collect()
    }

    /// True when no id was drawn twice (a 122-bit collision, but cheap to check).
    pub fn ids_are_unique(&self) -> bool {
        let mut seen = HashSet::with_capacity(self.fresh.len());
        self.fresh.iter().all(|e| seen.insert(e.message_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use inventory_inbox::event::{decode, Header};
    use inventory_inbox::window::DedupWindow;
    use rand::SeedableRng;

    fn config() -> MixConfig {
        MixConfig {
            duplicate_ratio: 0.05,
            poison_ratio: 0.01,
            skus: 1000,
            hot_skus: 10,
            hot_share: 0.5,
            event_day_offset: 0,
        }
    }

    fn generator(config: MixConfig) -> Generator {
        Generator::new(config, StdRng::seed_from_u64(7), "t1")
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).unwrap() + Duration::microseconds(123_456)
    }

    fn draw(config: MixConfig, n: usize) -> Vec<Planned> {
        let mut generator = generator(config);
        (0..n).map(|_| generator.next(now())).collect()
    }

    fn headers_of(record: &Record) -> Vec<Header> {
        record
            .headers
            .iter()
            .map(|(key, value)| Header {
                key: key.clone(),
                value: Some(value.as_bytes().to_vec()),
            })
            .collect()
    }

    #[test]
    fn mix_ratios_match_the_configuration() {
        let mut manifest = Manifest::default();
        for planned in draw(config(), 100_000) {
            manifest.record(&planned);
        }
        assert_eq!(manifest.events_sent(), 100_000);
        assert!(
            manifest.duplicates.abs_diff(5_000) <= 1,
            "{}",
            manifest.duplicates
        );
        assert!(
            manifest.poison_sent().abs_diff(1_000) <= 1,
            "{}",
            manifest.poison_sent()
        );
        assert_eq!(
            manifest.unique_events(),
            100_000 - manifest.duplicates - manifest.poison_sent()
        );
        assert!(manifest.ids_are_unique());
    }

    #[test]
    fn an_event_day_offset_moves_the_event_time_but_not_the_send_instant() {
        let mut c = config();
        c.event_day_offset = 3;
        let mut manifest = Manifest::default();
        for planned in draw(c, 200) {
            manifest.record(&planned);
            if let Planned::Fresh { event, sent_at, .. } = planned {
                assert_eq!(sent_at, to_millis(now()));
                assert_eq!(event.occurred_at, to_millis(now()) + Duration::days(3));
            }
        }
        assert!(manifest.fresh.iter().all(|e| e.sent_at == to_millis(now())));
    }

    #[test]
    fn zero_ratios_send_only_fresh_events() {
        let mut c = config();
        c.duplicate_ratio = 0.0;
        c.poison_ratio = 0.0;
        assert!(draw(c, 1_000)
            .iter()
            .all(|p| matches!(p, Planned::Fresh { .. })));
    }

    #[test]
    fn fresh_events_are_valid_orders_of_distinct_known_skus() {
        let known: HashSet<String> = config().sku_names().into_iter().collect();
        let mut order_ids = HashSet::new();
        for planned in draw(config(), 5_000) {
            let Planned::Fresh { record, event, .. } = planned else {
                continue;
            };
            let decoded = decode(Some(&record.payload), &headers_of(&record))
                .unwrap()
                .event;
            assert_eq!(decoded, event);
            assert_eq!(record.key, event.order_id);
            assert!((1..=MAX_LINES_PER_ORDER).contains(&event.lines.len()));
            assert!(event.lines.iter().all(|l| known.contains(&l.sku)));
            assert!(order_ids.insert(event.order_id));
            assert_eq!(event.occurred_at, to_millis(now()));
        }
    }

    #[test]
    fn about_half_of_the_lines_go_to_the_hot_skus() {
        let hot: HashSet<String> = (0..10).map(sku_name).collect();
        let (mut lines, mut on_hot) = (0usize, 0usize);
        for planned in draw(config(), 20_000) {
            if let Planned::Fresh { event, .. } = planned {
                lines += event.lines.len();
                on_hot += event.lines.iter().filter(|l| hot.contains(&l.sku)).count();
            }
        }
        let share = on_hot as f64 / lines as f64;
        assert!((0.45..0.56).contains(&share), "hot share {share}");
    }

    #[test]
    fn fewer_skus_than_lines_still_ends() {
        let mut c = config();
        c.skus = 2;
        c.hot_skus = 1;
        c.hot_share = 1.0;
        for planned in draw(c, 200) {
            if let Planned::Fresh { event, .. } = planned {
                assert!(event.lines.len() <= 2);
            }
        }
    }

    #[test]
    fn a_duplicate_resends_an_earlier_record_unchanged() {
        let mut earlier = HashMap::new();
        let mut duplicates = 0;
        for planned in draw(config(), 2_000) {
            match planned {
                Planned::Fresh { record, event, .. } => {
                    earlier.insert(event.message_id, record);
                }
                Planned::Duplicate { record, message_id } => {
                    assert_eq!(earlier.get(&message_id), Some(&record));
                    duplicates += 1;
                }
                Planned::Poison { .. } => {}
            }
        }
        assert!(duplicates > 0);
    }

    #[test]
    fn every_poison_reason_is_parked_for_exactly_that_reason() {
        let mut c = config();
        c.poison_ratio = 0.5;
        c.duplicate_ratio = 0.0;
        let today = now().date_naive();
        let window = DedupWindow::new((-14..=2).map(|d| today + Duration::days(d)));
        let known: HashSet<String> = c.sku_names().into_iter().collect();
        let mut seen = HashSet::new();
        for planned in draw(c, 48) {
            let Planned::Poison { record, reason } = planned else {
                continue;
            };
            let outcome = decode(Some(&record.payload), &headers_of(&record));
            let actual = match outcome {
                Err(rejection) => rejection.reason,
                Ok(event) => {
                    if let Some(reason) = window.check(event.event_day()) {
                        reason
                    } else {
                        assert!(event.lines.iter().any(|l| !known.contains(&l.sku)));
                        ParkReason::UnknownSku
                    }
                }
            };
            assert_eq!(actual, reason);
            seen.insert(reason);
        }
        assert_eq!(seen, POISON_REASONS.iter().copied().collect());
    }

    #[test]
    fn poison_is_round_robin_over_the_reasons() {
        let mut c = config();
        c.poison_ratio = 0.1;
        let mut manifest = Manifest::default();
        for planned in draw(c, 1_200) {
            manifest.record(&planned);
        }
        assert_eq!(manifest.poison.len(), POISON_REASONS.len());
        assert!(
            manifest.poison.values().all(|&n| n == 10),
            "{:?}",
            manifest.poison
        );
    }

    #[test]
    fn manifest_sums_quantities_per_sku() {
        let mut manifest = Manifest::default();
        let mut expected: HashMap<String, i64> = HashMap::new();
        for planned in draw(config(), 3_000) {
            if let Planned::Fresh { event, .. } = &planned {
                for line in &event.lines {
                    *expected.entry(line.sku.clone()).or_default() += i64::from(line.quantity);
                }
            }
            manifest.record(&planned);
        }
        assert_eq!(manifest.expected_reserved, expected);
    }

    #[test]
    fn invalid_mixes_are_refused_naming_the_flag() {
        let mut c = config();
        c.duplicate_ratio = 0.7;
        c.poison_ratio = 0.4;
        assert!(c.validate().unwrap_err().contains("--poison-ratio"));
        let mut c = config();
        c.hot_skus = 2000;
        assert!(c.validate().unwrap_err().contains("--hot-skus"));
        assert!(config().validate().is_ok());
    }
}
