//! Paced traffic of unique orders with duplicates, and the check that the
//! database applied each exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::producer::FutureProducer;

use super::*;

/// A stream of unique orders with exact duplicates, and what the database
/// must show once it has been consumed.
pub struct Traffic {
    /// What is produced, in order.
    pub records: Vec<Outgoing>,
    pub unique_events: i64,
    pub order_lines: usize,
    /// sku -> sum of the quantities of the unique orders.
    pub reserved: BTreeMap<String, i64>,
}

impl Traffic {
    /// `unique` orders `PREFIX-i` of 1–3 lines over `skus` (line k names SKU
    /// (i + 2k) mod len, distinct within the order when there are at least
    /// five), with an exact copy of the event sent `lag` events earlier after
    /// every `every` events: a producer retry or a replay.
    pub fn orders(prefix: &str, skus: &[&str], unique: usize, every: usize, lag: usize) -> Traffic {
        let mut reserved: BTreeMap<String, i64> = BTreeMap::new();
        let mut order_lines = 0;
        let mut sent = Vec::with_capacity(unique);
        let mut records = Vec::with_capacity(unique + unique / every);
        for i in 0..unique {
            let lines: Vec<(&str, i32)> = (0..=i % 3)
                .map(|k| (skus[(i + 2 * k) % skus.len()], 1 + ((i * 7 + k) % 4) as i32))
                .collect();
            for (sku, quantity) in &lines {
                *reserved.entry((*sku).to_owned()).or_default() += i64::from(*quantity);
            }
            order_lines += lines.len();
            let record = Outgoing::event(&order(&format!("{prefix}-{i}"), &lines));
            sent.push(record.clone());
            records.push(record);
            if i % every == every - 1 && i >= lag {
                records.push(sent[i - lag].clone());
            }
        }
        Traffic {
            records,
            unique_events: unique as i64,
            order_lines,
            reserved,
        }
    }

    /// Every unique order applied exactly once, nothing parked.
    pub async fn assert_applied_once(&self, db: &TestDb) {
        assert_eq!(db.ledger_rows().await, self.unique_events, "ledger rows");
        let reserved: BTreeMap<String, i64> = db
            .stock()
            .await
            .into_iter()
            .map(|(sku, (_, reserved))| (sku, reserved))
            .collect();
        assert_eq!(reserved, self.reserved, "per-SKU reserved stock");
        let reservations = db.reservations().await;
        assert_eq!(
            reservations.len(),
            self.order_lines,
            "order_reservation rows"
        );
        assert!(
            reservations
                .values()
                .all(|(_, status)| status == "reserved"),
            "every line reserved"
        );
        assert_eq!(db.parked().await, vec![], "nothing parked");
    }

    /// Produces the records in chunks of `per_tick` every `tick`.
    pub fn produce_paced(
        &self,
        producer: FutureProducer,
        topic: &str,
        per_tick: usize,
        tick: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let (records, topic) = (self.records.clone(), topic.to_owned());
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            for (n, chunk) in records.chunks(per_tick).enumerate() {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep_until(started + tick * (n as u32 + 1)).await;
            }
        })
    }
}
