//! The record of maintenance runs (`inbox_maintenance_run`): each run of
//! [`super::maintain`] writes its row when it starts and completes it when
//! it ends, with what it did or why it failed; the console's overview
//! reads the last ones. Bounded by count: the row a run starts with
//! deletes those more than [`RUNS_KEPT`] runs back.

use chrono::{DateTime, Utc};

use super::{DbPool, StoreError};

/// What one maintenance run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintainReport {
    /// False when another instance held the maintenance lock.
    pub locked: bool,
    pub created: i32,
    pub dropped: i32,
    pub parked_deleted: i32,
    pub payloads_cleared: i32,
}

const BEGUN: &str = include_str!("../../sql/maintenance_begun.sql");
const ENDED: &str = include_str!("../../sql/maintenance_ended.sql");
const RUNS: &str = include_str!("../../sql/maintenance_runs.sql");

/// Maintenance runs the database keeps: weeks of hourly runs of one
/// instance, days of several, in a few tens of kilobytes.
pub const RUNS_KEPT: i32 = 200;

/// What started a maintenance run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaintenanceTrigger {
    /// `inventory-inbox migrate`.
    Migrate,
    /// `inventory-inbox maintain` (cron).
    Command,
    /// `inventory-inbox run`, at its start.
    StartUp,
    /// `inventory-inbox run`, hourly.
    Hourly,
}

impl MaintenanceTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            MaintenanceTrigger::Migrate => "migrate",
            MaintenanceTrigger::Command => "maintain",
            MaintenanceTrigger::StartUp => "run: start-up",
            MaintenanceTrigger::Hourly => "run: hourly",
        }
    }
}

/// One maintenance run as the database recorded it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MaintenanceRun {
    pub id: i64,
    pub started_at: DateTime<Utc>,
    /// [`MaintenanceTrigger::as_str`].
    pub started_by: String,
    /// `None`: still going, or its process stopped before it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// `Some(false)`: another instance held the lock; nothing was done.
    pub locked: Option<bool>,
    pub created: Option<i32>,
    pub dropped: Option<i32>,
    pub parked_deleted: Option<i32>,
    pub payloads_cleared: Option<i32>,
    /// Why it failed.
    pub error: Option<String>,
}

impl MaintenanceRun {
    /// It held the lock and ended without an error: it did the work.
    pub fn did_the_work(&self) -> bool {
        self.finished_at.is_some() && self.locked == Some(true) && self.error.is_none()
    }
}

/// Writes the row of a run that starts (and prunes the oldest); its id.
pub(super) async fn begun(pool: &DbPool, by: MaintenanceTrigger) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(BEGUN)
        .bind(by.as_str())
        .bind(RUNS_KEPT)
        .fetch_one(pool)
        .await?)
}

/// Completes run `id`'s row with its result.
pub(super) async fn ended(
    pool: &DbPool,
    id: i64,
    result: &Result<MaintainReport, StoreError>,
) -> Result<(), StoreError> {
    let (report, error) = match result {
        Ok(report) => (Some(report), None),
        Err(error) => (None, Some(error.to_string())),
    };
    sqlx::query(ENDED)
        .bind(id)
        .bind(report.map(|r| r.locked))
        .bind(report.map(|r| r.created))
        .bind(report.map(|r| r.dropped))
        .bind(report.map(|r| r.parked_deleted))
        .bind(report.map(|r| r.payloads_cleared))
        .bind(error)
        .execute(pool)
        .await?;
    Ok(())
}

/// The last `last` runs, newest first, and the last that did the work
/// when it is older.
pub async fn maintenance_runs(pool: &DbPool, last: i64) -> Result<Vec<MaintenanceRun>, StoreError> {
    Ok(sqlx::query_as(RUNS).bind(last).fetch_all(pool).await?)
}
