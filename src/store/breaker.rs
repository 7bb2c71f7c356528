//! The poison breaker's state in the database (`inbox_breaker`): opened by
//! the member that tripped it, read by every member, resumed by an operator
//! (`inventory-inbox breaker resume`).

use chrono::{DateTime, Utc};
use sqlx::FromRow;

use super::{DbPool, StoreError};

const OPEN: &str = include_str!("../../sql/breaker_open.sql");
const STATE: &str = include_str!("../../sql/breaker_state.sql");
const RESUME: &str = include_str!("../../sql/breaker_resume.sql");

/// The breaker of one consumer.
#[derive(Debug, Clone, PartialEq, Eq, FromRow, serde::Serialize)]
pub struct BreakerState {
    pub opened_at: DateTime<Utc>,
    pub reason: String,
    pub resumed_at: Option<DateTime<Utc>>,
    pub resumed_by: Option<String>,
}

impl BreakerState {
    /// Opened and not resumed since.
    pub fn holds(&self) -> bool {
        self.resumed_at.is_none()
    }
}

/// The breaker opens for `consumer`, for `reason`.
pub async fn open_breaker(pool: &DbPool, consumer: &str, reason: &str) -> Result<(), StoreError> {
    sqlx::query(OPEN)
        .bind(consumer)
        .bind(reason)
        .execute(pool)
        .await?;
    Ok(())
}

/// The breaker of `consumer`, if it was ever opened.
pub async fn breaker(pool: &DbPool, consumer: &str) -> Result<Option<BreakerState>, StoreError> {
    Ok(sqlx::query_as(STATE)
        .bind(consumer)
        .fetch_optional(pool)
        .await?)
}

/// Resumes the breaker of `consumer`; the state it resumed, when it held.
pub async fn resume_breaker(
    pool: &DbPool,
    consumer: &str,
) -> Result<Option<BreakerState>, StoreError> {
    Ok(sqlx::query_as(RESUME)
        .bind(consumer)
        .fetch_optional(pool)
        .await?)
}
