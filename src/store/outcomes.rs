//! The outcomes per minute (the console's chart): a ring in the database
//! (`inbox_outcome_minute`) that each member adds its counts to every few
//! seconds, and the last hour of it read back. Functions over the pool.

use std::collections::BTreeMap;

use chrono::{DateTime, DurationRound, Utc};

use super::{BatchOutcome, DbPool, StoreError};

const BY_MINUTE: &str = include_str!("../../sql/outcomes_by_minute.sql");
const FLUSH: &str = include_str!("../../sql/outcomes_flush.sql");

/// Minutes the ring holds per consumer and outcome: what a member keeps
/// for a flush the database refused, too.
const RING_MINUTES: i64 = 120;

/// Events of one outcome in one minute.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct OutcomeMinute {
    pub minute: DateTime<Utc>,
    /// `processed`, `business_duplicate`, `duplicate` or `parked`.
    pub outcome: String,
    pub events: i64,
}

/// `consumer`'s events per minute by outcome over the last hour, as its
/// members counted them (sql/outcomes_by_minute.sql says what is left out).
pub async fn outcomes_by_minute(
    pool: &DbPool,
    consumer: &str,
) -> Result<Vec<OutcomeMinute>, StoreError> {
    Ok(sqlx::query_as(BY_MINUTE)
        .bind(consumer)
        .fetch_all(pool)
        .await?)
}

/// A member's counts of outcomes per minute since its last flush.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OutcomeTally {
    counts: BTreeMap<(DateTime<Utc>, &'static str), i64>,
}

impl OutcomeTally {
    /// What a round's committed batches did, counted in the minute of `at`.
    pub fn record(&mut self, outcome: &BatchOutcome, at: DateTime<Utc>) {
        let parked = outcome.newly_parked.len() as u64;
        let fresh = outcome
            .processed
            .saturating_sub(outcome.business_duplicates);
        for (name, events) in [
            ("processed", fresh),
            ("business_duplicate", outcome.business_duplicates),
            ("duplicate", outcome.duplicates),
            ("parked", parked),
        ] {
            self.add(at, name, events);
        }
    }

    fn add(&mut self, at: DateTime<Utc>, outcome: &'static str, events: u64) {
        if events == 0 {
            return;
        }
        let minute = at
            .duration_trunc(chrono::Duration::minutes(1))
            .unwrap_or(at);
        *self.counts.entry((minute, outcome)).or_default() += events as i64;
        // Counts older than the ring are of no use: a database that
        // refuses the flushes for hours keeps this bounded.
        let oldest = minute - chrono::Duration::minutes(RING_MINUTES - 1);
        self.counts.retain(|(m, _), _| *m >= oldest);
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Counts taken back after a flush that failed, to be sent with the
    /// next one.
    pub fn restore(&mut self, earlier: OutcomeTally) {
        for ((minute, outcome), events) in earlier.counts {
            self.add(minute, outcome, events as u64);
        }
    }
}

/// Adds `tally` to `consumer`'s ring, in one statement.
pub async fn flush_outcomes(
    pool: &DbPool,
    consumer: &str,
    tally: &OutcomeTally,
) -> Result<(), StoreError> {
    if tally.is_empty() {
        return Ok(());
    }
    let (mut minutes, mut outcomes, mut events) = (Vec::new(), Vec::new(), Vec::new());
    for ((minute, outcome), count) in &tally.counts {
        minutes.push(*minute);
        outcomes.push(*outcome);
        events.push(*count);
    }
    sqlx::query(FLUSH)
        .bind(consumer)
        .bind(minutes)
        .bind(outcomes)
        .bind(events)
        .execute(pool)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(hour: u32, minute: u32, second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 7, hour, minute, second)
            .unwrap()
    }

    #[test]
    fn a_round_is_counted_by_outcome_in_its_minute() {
        let mut tally = OutcomeTally::default();
        let round = BatchOutcome {
            processed: 7,
            business_duplicates: 2,
            duplicates: 3,
            ..BatchOutcome::default()
        };
        tally.record(&round, at(1, 0, 10));
        tally.record(&round, at(1, 0, 50));
        tally.record(&round, at(1, 1, 0));
        let minute = |m| at(1, m, 0);
        assert_eq!(tally.counts.get(&(minute(0), "processed")), Some(&10));
        assert_eq!(
            tally.counts.get(&(minute(0), "business_duplicate")),
            Some(&4)
        );
        assert_eq!(tally.counts.get(&(minute(0), "duplicate")), Some(&6));
        assert_eq!(tally.counts.get(&(minute(1), "processed")), Some(&5));
        // Nothing parked: no entry of zero.
        assert!(!tally.counts.keys().any(|(_, o)| *o == "parked"));
    }

    #[test]
    fn counts_older_than_the_ring_are_dropped() {
        let mut tally = OutcomeTally::default();
        tally.add(at(1, 0, 0), "processed", 5);
        tally.add(at(2, 59, 0), "processed", 1);
        assert_eq!(tally.counts.len(), 2, "119 minutes apart: both kept");
        tally.add(at(3, 0, 0), "processed", 1);
        assert_eq!(
            tally.counts.len(),
            2,
            "120 minutes apart: the oldest dropped"
        );
        assert!(!tally.counts.contains_key(&(at(1, 0, 0), "processed")));
    }

    #[test]
    fn a_failed_flush_is_sent_again_with_the_next() {
        let mut tally = OutcomeTally::default();
        tally.add(at(1, 0, 0), "parked", 2);
        let failed = std::mem::take(&mut tally);
        tally.add(at(1, 0, 30), "parked", 1);
        tally.restore(failed);
        assert_eq!(tally.counts.get(&(at(1, 0, 0), "parked")), Some(&3));
    }
}
