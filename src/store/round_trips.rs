//! The distance to the database: the last few round trips timed (at each
//! read of the dedup window), of which the shortest counts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{DbPool, StoreError};

/// Timed round trips kept to estimate the distance to the database.
const ROUND_TRIP_SAMPLES: usize = 5;

/// The last few round trips timed.
#[derive(Debug, Default)]
pub struct RoundTrips {
    samples: Mutex<Vec<Duration>>,
}

impl RoundTrips {
    /// Times a statement that costs the database nothing (on a connection
    /// where it is prepared already, or in the simple protocol through a
    /// transaction pooler): its time is the round trip.
    pub(super) async fn time(&self, pool: &DbPool) -> Result<(), StoreError> {
        let mut connection = pool.acquire().await?;
        let mut took = Duration::MAX;
        for _ in 0..2 {
            let asked = Instant::now();
            if pool.prepares() {
                sqlx::query("SELECT 1").execute(&mut *connection).await?;
            } else {
                sqlx::Executor::execute(&mut *connection, "SELECT 1").await?;
            }
            took = asked.elapsed();
        }
        tracing::debug!(round_trip_ms = took.as_secs_f64() * 1e3, "round trip timed");
        let mut samples = self.samples.lock().expect("round trips lock");
        if samples.len() == ROUND_TRIP_SAMPLES {
            samples.remove(0);
        }
        samples.push(took);
        Ok(())
    }

    /// The round trip to the database: the shortest of the last few timed
    /// (the shortest, so that one slow answer does not count).
    pub fn shortest(&self) -> Option<Duration> {
        self.samples
            .lock()
            .expect("round trips lock")
            .iter()
            .min()
            .copied()
    }
}
