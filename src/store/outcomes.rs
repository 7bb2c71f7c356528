//! The outcomes the database records, per minute (the console's chart):
//! a function over the pool.

use chrono::{DateTime, Utc};

use super::{DbPool, StoreError};
use crate::event::ParkReason;

const BY_MINUTE: &str = include_str!("../../sql/outcomes_by_minute.sql");

/// Events of one outcome in one minute.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct OutcomeMinute {
    pub minute: DateTime<Utc>,
    /// `processed`, `business_duplicate` or `parked`.
    pub outcome: String,
    pub events: i64,
}

/// `consumer`'s events per minute by outcome over the last hour
/// (sql/outcomes_by_minute.sql says what is left out).
pub async fn outcomes_by_minute(
    pool: &DbPool,
    consumer: &str,
) -> Result<Vec<OutcomeMinute>, StoreError> {
    let reasons: Vec<&str> = ParkReason::ALL.iter().map(|r| r.as_str()).collect();
    Ok(sqlx::query_as(BY_MINUTE)
        .bind(consumer)
        .bind(reasons)
        .fetch_all(pool)
        .await?)
}
