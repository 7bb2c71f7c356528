//! What the generator reads and writes in the consumer's database: it seeds
//! the stock, takes a snapshot of the counters before the run, waits for the
//! consumer to drain, and reads back the ledger rows of the events it sent.
//!
//! Runs may share a database, so every figure is a delta between two
//! snapshots (stock `reserved`, ledger rows and parked rows of this consumer)
//! or is read for this run's own message ids.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::commands::flags::Target;
use crate::verdict::reconcile::{reconcile, Reconciliation, Sent};
use crate::workload::generate::Manifest;

/// Stock given to every seeded SKU: nothing the run reserves is ever rejected.
const SEED_ON_HAND: i64 = 1_000_000_000_000;
/// How often the drain wait looks at the counters.
const DRAIN_POLL: Duration = Duration::from_millis(250);
/// Ids per `= ANY($1)` query, to keep one statement's parameter modest.
const IDS_PER_QUERY: usize = 50_000;

/// The consumer's database, scoped to one logical consumer and topic.
pub struct Ledger {
    pool: PgPool,
    consumer: String,
    topic: String,
    /// The event days this run can write; bounds the ledger scans to their
    /// partitions.
    days: (NaiveDate, NaiveDate),
}

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

/// What the database shows once a run's records are in.
pub struct Settled {
    /// Whether every record was applied or parked before the timeout.
    pub drained: bool,
    /// The ledger rows of the run's unique events.
    pub applied: Vec<AppliedRow>,
    pub reconciliation: Reconciliation,
}

impl Ledger {
    /// Waits until every record of `manifest` is applied or parked (or
    /// `timeout` passed), then reconciles the database against `before`.
    pub async fn settle(
        &self,
        manifest: &Manifest,
        before: &Snapshot,
        skus: &[String],
        timeout: Duration,
    ) -> Result<Settled> {
        let expected = (manifest.unique_events() + manifest.poison_sent()) as i64;
        let drained = self.wait_for_drain(before, expected, timeout).await?;
        let after = self.snapshot(skus).await?;
        let unique_ids = manifest.fresh_ids();
        let applied = self.applied(&unique_ids).await?;
        let reconciliation = reconcile(
            &Sent {
                unique_ids: &unique_ids,
                expected_reserved: &manifest.expected_reserved,
                poison: &manifest.poison,
            },
            before,
            &after,
            &applied,
        );
        Ok(Settled {
            drained,
            applied,
            reconciliation,
        })
    }

    /// The ledger of the consumer under test, for a run of `run_seconds`:
    /// its events fall on the days from today (UTC) until a day after the
    /// run's end.
    pub async fn of_target(target: &Target, run_seconds: f64) -> Result<Self> {
        let now = Utc::now();
        let last_day = now + chrono::Duration::seconds(run_seconds as i64 + 86_400);
        Ledger::connect(
            &target.database_url,
            &target.consumer_name,
            &target.topic,
            (now.date_naive(), last_day.date_naive()),
        )
        .await
    }

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
        Ok(Ledger {
            pool,
            consumer: consumer.to_owned(),
            topic: topic.to_owned(),
            days,
        })
    }

    /// Creates the SKUs, or raises their stock, so that no line is rejected.
    /// `reserved` is left as it is: reconciliation compares its increase.
    pub async fn seed(&self, skus: &[String]) -> Result<()> {
        sqlx::query(
            "INSERT INTO inventory_stock (sku, on_hand, reserved)
             SELECT sku, $2, 0 FROM UNNEST($1::text[]) AS s(sku)
             ON CONFLICT (sku) DO UPDATE
             SET on_hand = GREATEST(inventory_stock.on_hand, inventory_stock.reserved + $2)",
        )
        .bind(skus)
        .bind(SEED_ON_HAND)
        .execute(&self.pool)
        .await
        .context("seeding inventory_stock")?;
        Ok(())
    }

    pub async fn snapshot(&self, skus: &[String]) -> Result<Snapshot> {
        let reserved = sqlx::query("SELECT sku, reserved FROM inventory_stock WHERE sku = ANY($1)")
            .bind(skus)
            .fetch_all(&self.pool)
            .await
            .context("reading inventory_stock")?
            .into_iter()
            .map(|row| (row.get::<String, _>(0), row.get::<i64, _>(1)))
            .collect();
        let parked = sqlx::query(
            "SELECT reason, count(*) FROM inbox_parked
             WHERE consumer = $1 AND topic = $2 GROUP BY reason",
        )
        .bind(&self.consumer)
        .bind(&self.topic)
        .fetch_all(&self.pool)
        .await
        .context("counting inbox_parked")?
        .into_iter()
        .map(|row| (row.get::<String, _>(0), row.get::<i64, _>(1)))
        .collect();
        Ok(Snapshot {
            reserved,
            ledger_rows: self.ledger_rows().await?,
            parked,
        })
    }

    async fn ledger_rows(&self) -> Result<i64> {
        sqlx::query_scalar(
            "SELECT count(*) FROM processed_inbox
             WHERE consumer = $1 AND event_day BETWEEN $2 AND $3",
        )
        .bind(&self.consumer)
        .bind(self.days.0)
        .bind(self.days.1)
        .fetch_one(&self.pool)
        .await
        .context("counting processed_inbox")
    }

    async fn parked_rows(&self) -> Result<i64> {
        sqlx::query_scalar("SELECT count(*) FROM inbox_parked WHERE consumer = $1 AND topic = $2")
            .bind(&self.consumer)
            .bind(&self.topic)
            .fetch_one(&self.pool)
            .await
            .context("counting inbox_parked")
    }

    /// Waits until ledger and parked rows together grew by `expected` since
    /// `before`, or `timeout` passed. Returns whether it drained.
    pub async fn wait_for_drain(
        &self,
        before: &Snapshot,
        expected: i64,
        timeout: Duration,
    ) -> Result<bool> {
        let started = Instant::now();
        let mut last_report = Instant::now();
        loop {
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

    /// The ledger rows of these ids (at most one each: the primary key).
    pub async fn applied(&self, ids: &[Uuid]) -> Result<Vec<AppliedRow>> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_QUERY) {
            let found = sqlx::query(
                "SELECT message_id, processed_at FROM processed_inbox
                 WHERE consumer = $1 AND event_day BETWEEN $2 AND $3
                   AND message_id = ANY($4)",
            )
            .bind(&self.consumer)
            .bind(self.days.0)
            .bind(self.days.1)
            .bind(chunk)
            .fetch_all(&self.pool)
            .await
            .context("reading the ledger rows of the run")?;
            rows.extend(found.into_iter().map(|row| AppliedRow {
                message_id: row.get(0),
                processed_at: row.get(1),
            }));
        }
        Ok(rows)
    }
}
