//! The consumer's database as the generator sees it: it seeds the stock,
//! takes snapshots of the counters reconciliation compares (stock
//! `reserved`, ledger rows, parked rows), waits for the consumer to drain,
//! and reads back the ledger rows of the events it sent. It only reads and
//! seeds; what the figures mean is decided in [`crate::verdict`].
//!
//! Runs may share a database, so every figure is a delta between two
//! snapshots of this consumer (and topic) or is read for this run's own
//! message ids. The statements are in `loadtest/sql/`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::NaiveDate;
use sqlx::postgres::{PgPoolOptions, PgRow};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::verdict::reconcile::{AppliedRow, Snapshot};

const SEED_STOCK: &str = include_str!("../../sql/seed_stock.sql");
const RESERVED_BY_SKU: &str = include_str!("../../sql/reserved_by_sku.sql");
const PARKED_BY_REASON: &str = include_str!("../../sql/parked_by_reason.sql");
const COUNT_LEDGER_ROWS: &str = include_str!("../../sql/count_ledger_rows.sql");
const COUNT_PARKED_ROWS: &str = include_str!("../../sql/count_parked_rows.sql");
const APPLIED_ROWS: &str = include_str!("../../sql/applied_rows.sql");
const RECORDS_READ: &str = include_str!("../../sql/records_read.sql");
const TODAY_AND_RETENTION: &str = include_str!("../../sql/today_and_retention.sql");
const STOCK_ON_HAND: &str = include_str!("../../sql/stock_on_hand.sql");
const POSITIONS: &str = include_str!("../../sql/positions.sql");

/// Stock given to every seeded SKU: nothing the run reserves is ever rejected.
const SEED_ON_HAND: i64 = 1_000_000_000_000;
/// How often the drain wait looks at the counters.
const DRAIN_POLL: Duration = Duration::from_millis(250);
/// How often the drain wait counts rows while the positions say it has not
/// drained.
const DRAIN_COUNT_EVERY: Duration = Duration::from_secs(5);
/// Ids per `= ANY($1)` query, to keep one statement's parameter modest.
const IDS_PER_QUERY: usize = 50_000;

/// The consumer's database, scoped to one logical consumer and topic.
pub struct Database {
    pool: PgPool,
    consumer: String,
    topic: String,
    /// The event days this run can write; bounds the ledger scans to their
    /// partitions.
    days: (NaiveDate, NaiveDate),
}

impl Database {
    pub async fn connect(
        url: &str,
        consumer: &str,
        topic: &str,
        days: (NaiveDate, NaiveDate),
    ) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .context("connecting to DATABASE_URL")?;
        Ok(Database {
            pool,
            consumer: consumer.to_owned(),
            topic: topic.to_owned(),
            days,
        })
    }

    /// Creates the SKUs, or raises their stock, so that no line is rejected.
    /// `reserved` is left as it is: reconciliation compares its increase.
    pub async fn seed(&self, skus: &[String]) -> Result<()> {
        sqlx::query(SEED_STOCK)
            .bind(skus)
            .bind(SEED_ON_HAND)
            .execute(&self.pool)
            .await
            .context("seeding inventory_stock")?;
        Ok(())
    }

    pub async fn snapshot(&self, skus: &[String]) -> Result<Snapshot> {
        let reserved = sqlx::query(RESERVED_BY_SKU)
            .bind(skus)
            .fetch_all(&self.pool)
            .await
            .and_then(|rows| by_name(&rows, "sku", "reserved"))
            .context("reading inventory_stock")?;
        let parked = sqlx::query(PARKED_BY_REASON)
            .bind(&self.consumer)
            .bind(&self.topic)
            .fetch_all(&self.pool)
            .await
            .and_then(|rows| by_name(&rows, "reason", "parked"))
            .context("counting inbox_parked")?;
        Ok(Snapshot {
            reserved,
            ledger_rows: self.ledger_rows().await?,
            parked,
        })
    }

    async fn ledger_rows(&self) -> Result<i64> {
        sqlx::query_scalar(COUNT_LEDGER_ROWS)
            .bind(&self.consumer)
            .bind(self.days.0)
            .bind(self.days.1)
            .fetch_one(&self.pool)
            .await
            .context("counting processed_inbox")
    }

    async fn parked_rows(&self) -> Result<i64> {
        sqlx::query_scalar(COUNT_PARKED_ROWS)
            .bind(&self.consumer)
            .bind(&self.topic)
            .fetch_one(&self.pool)
            .await
            .context("counting inbox_parked")
    }

    /// Waits until ledger and parked rows together grew by `expected` since
    /// `before`, or `timeout` passed. Returns whether it drained.
    ///
    /// Counting the rows scans the day's ledger: under load it would take
    /// CPU from the consumer it measures (a tenth of the machine four times
    /// a second on a ledger of a million rows). So they are counted only
    /// once the consumer's positions in the topic add up to the `records`
    /// sent to it (a few rows of `inbox_position`), or every
    /// `DRAIN_COUNT_EVERY` whatever the positions say.
    pub async fn wait_for_drain(
        &self,
        before: &Snapshot,
        expected: i64,
        records: i64,
        timeout: Duration,
    ) -> Result<bool> {
        let started = Instant::now();
        let mut last_report = Instant::now();
        let mut last_count: Option<Instant> = None;
        loop {
            let read = self.records_read().await?;
            let count_due = last_count.is_none_or(|at| at.elapsed() >= DRAIN_COUNT_EVERY);
            if read < records && !count_due && started.elapsed() < timeout {
                tokio::time::sleep(DRAIN_POLL).await;
                continue;
            }
            last_count = Some(Instant::now());
            let ledger = self.ledger_rows().await? - before.ledger_rows;
            let parked = self.parked_rows().await? - before.parked_rows();
            if ledger + parked >= expected {
                return Ok(true);
            }
            if started.elapsed() >= timeout {
                eprintln!(
                    "drain timeout after {:.0} s: {} of {expected} records applied or parked",
                    timeout.as_secs_f64(),
                    ledger + parked
                );
                return Ok(false);
            }
            if last_report.elapsed() >= Duration::from_secs(5) {
                eprintln!(
                    "draining: {} of {expected} applied or parked",
                    ledger + parked
                );
                last_report = Instant::now();
            }
            tokio::time::sleep(DRAIN_POLL).await;
        }
    }

    /// Records of the topic the consumer has taken: the sum of its
    /// positions (next offsets) over the topic's partitions.
    async fn records_read(&self) -> Result<i64> {
        sqlx::query_scalar(RECORDS_READ)
            .bind(&self.consumer)
            .bind(&self.topic)
            .fetch_one(&self.pool)
            .await
            .context("reading inbox_position")
    }

    /// The pool, for readers of whole tables (the reference model's).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// What the reference model starts from: the database's today, the
    /// ledger's retention in days, and every SKU's stock on hand.
    pub async fn model_inputs(&self) -> Result<(NaiveDate, u64, BTreeMap<String, i64>)> {
        let row = sqlx::query(TODAY_AND_RETENTION)
            .fetch_one(&self.pool)
            .await
            .context("reading inbox_today() and inbox_settings")?;
        let today: NaiveDate = row.try_get("today")?;
        let retention: i64 = row.try_get("retention_days")?;
        let rows = sqlx::query(STOCK_ON_HAND)
            .fetch_all(&self.pool)
            .await
            .context("reading inventory_stock")?;
        let on_hand = by_name(&rows, "sku", "on_hand")?.into_iter().collect();
        Ok((today, retention.try_into()?, on_hand))
    }

    /// The consumer's next offset of each partition it has a position for.
    pub async fn positions(&self) -> Result<BTreeMap<i32, i64>> {
        let rows = sqlx::query(POSITIONS)
            .bind(&self.consumer)
            .bind(&self.topic)
            .fetch_all(&self.pool)
            .await
            .context("reading inbox_position")?;
        rows.iter()
            .map(|row| Ok((row.try_get("kafka_partition")?, row.try_get("next_offset")?)))
            .collect()
    }

    /// The ledger rows of these ids (at most one each: the primary key).
    pub async fn applied(&self, ids: &[Uuid]) -> Result<Vec<AppliedRow>> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let found = sqlx::query(APPLIED_ROWS)
                .bind(&self.consumer)
                .bind(self.days.0)
                .bind(self.days.1)
                .bind(chunk)
                .fetch_all(&self.pool)
                .await
                .and_then(|found| {
                    found
                        .iter()
                        .map(|row| {
                            Ok(AppliedRow {
                                message_id: row.try_get("message_id")?,
                                processed_at: row.try_get("processed_at")?,
                            })
                        })
                        .collect::<sqlx::Result<Vec<AppliedRow>>>()
                })
                .context("reading the ledger rows of the run")?;
            rows.extend(found);
        }
        Ok(rows)
    }
}

/// Rows of `(name, number)` as a map, both read by column name.
fn by_name(rows: &[PgRow], name: &str, number: &str) -> sqlx::Result<HashMap<String, i64>> {
    rows.iter()
        .map(|row| Ok((row.try_get(name)?, row.try_get(number)?)))
        .collect()
}
