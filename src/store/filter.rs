//! The filter of each closed day of the ledger
//! (docs/design.md#the-filter-of-closed-days): a blocked Bloom filter of the
//! day's message ids, built by maintenance once the day is over and every
//! transaction that could still write it uncounted has ended, so that a
//! batch looks an id up on a closed day only when the filter may hold it.
//! The database hashes the ids (`uuid_hash_extended`, seeds 0 and 1) for the
//! build as for the look-up; this file sets the bits that
//! `inbox_filter_may_hold` reads (migrations/20261205000003_ledger_filter.sql,
//! and 20261205000004 for the days closed by the clock).

use std::time::{Duration, Instant};

use chrono::NaiveDate;
use futures::future::{BoxFuture, FutureExt};
use sqlx::{ConnectOptions, Connection as _, Executor as _, PgConnection, PgPool};

use super::StoreError;

const NEXT_DAY: &str = include_str!("../../sql/filter_next_day.sql");
const READ_DAY: &str = include_str!("../../sql/filter_read_day.sql");
const UNFILTERED_DAYS: &str = include_str!("../../sql/filter_unfiltered_days.sql");
const FETCH_PAGE: &str = "FETCH 100000 FROM inbox_filter_ids";

/// Bytes of a chunk: 62 blocks of 512 bits, two rows to a page.
const CHUNK_BYTES: usize = 3968;
const BLOCKS_PER_CHUNK: i64 = 62;
const BLOCK_BITS: i64 = 512;
/// Bits of the filter per id, and bits set per id: about 1 % false positives.
const BITS_PER_ID: i64 = 10;
const BITS_PER_ID_SET: i64 = 7;
/// Chunks sent per statement while publishing (~4 MB).
const CHUNKS_PER_STATEMENT: usize = 1000;
/// How long a build waits for the transactions that could still write a
/// day just closed (batches of a few milliseconds), and how often it looks.
const READY_WAIT: Duration = Duration::from_secs(2);
const READY_POLL: Duration = Duration::from_millis(50);

/// A day's filter, built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterBuilt {
    pub day: NaiveDate,
    pub ids: i64,
    pub chunks: usize,
    pub took: Duration,
}

/// A blocked Bloom filter being built: `chunks` chunks of [`CHUNK_BYTES`].
struct Bits {
    chunks: usize,
    bytes: Vec<u8>,
}

impl Bits {
    fn for_ids(ids: i64) -> Self {
        let chunk_bits = (CHUNK_BYTES * 8) as i64;
        let chunks =
            usize::try_from((ids * BITS_PER_ID + chunk_bits - 1) / chunk_bits).unwrap_or(0);
        Self {
            chunks,
            bytes: vec![0; chunks * CHUNK_BYTES],
        }
    }

    /// Sets the bits of an id with hashes `h1`, `h2` (see
    /// `inbox_filter_may_hold`: the same arithmetic on the same signed 64-bit
    /// values).
    fn insert(&mut self, h1: i64, h2: i64) {
        if self.chunks == 0 {
            return;
        }
        let chunk = ((h1 & 0x7fff_ffff) % self.chunks as i64) as usize;
        let block = ((h1 >> 32) & 0x7fff_ffff) % BLOCKS_PER_CHUNK;
        let a = h2 & 511;
        let b = ((h2 >> 9) & 511) | 1;
        for i in 0..BITS_PER_ID_SET {
            let bit = block * BLOCK_BITS + ((a + i * b) & 511);
            let byte = chunk * CHUNK_BYTES + (bit / 8) as usize;
            self.bytes[byte] |= 1 << (bit % 8);
        }
    }
}

/// Builds the filter of the next closed day that has none, or one that
/// missed a late write; `None` when every closed day has a clean one, or
/// another instance is building one now. Its own connection, without the
/// statement timeout: a day of production traffic is minutes of reading.
pub fn build_next_filter(pool: &PgPool) -> BoxFuture<'_, Result<Option<FilterBuilt>, StoreError>> {
    // Boxed: the compiler cannot otherwise tell that the future is Send
    // for any lifetime of `pool` (a spawned task awaits it).
    async move {
        sqlx::query(super::schema::CLOSE_DAYS).execute(pool).await?;
        let waiting_since = Instant::now();
        let day = loop {
            let Some((day, ready)) = sqlx::query_as::<_, (NaiveDate, bool)>(NEXT_DAY)
                .fetch_optional(pool)
                .await?
            else {
                return Ok(None);
            };
            if ready {
                break day;
            }
            if waiting_since.elapsed() >= READY_WAIT {
                return Ok(None);
            }
            tokio::time::sleep(READY_POLL).await;
        };
        let started = Instant::now();
        let options = (*pool.connect_options())
            .clone()
            .log_slow_statements(log::LevelFilter::Off, Duration::ZERO);
        let mut connection = PgConnection::connect_with(&options).await?;
        connection.execute("SET statement_timeout = 0").await?;
        // One snapshot for the count of late writes and the ids: a row it does
        // not hold was committed later, and counted as a late write then (a
        // transaction that could write the day uncounted is older than the
        // day's closed_xid, and the snapshot's oldest running one is not).
        connection
            .execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?;
        let claim: Option<(i64, i64)> = sqlx::query_as(
            "SELECT f.late_writes, (SELECT count(*) FROM processed_inbox p WHERE p.event_day = $1)
             FROM inbox_ledger_filter f
             WHERE f.event_day = $1
               AND pg_snapshot_xmin(pg_current_snapshot()) >= f.closed_xid
               AND pg_try_advisory_xact_lock(hashtext('inventory-inbox:filter'))",
        )
        .bind(day)
        .fetch_optional(&mut connection)
        .await?;
        let Some((late_writes, ids)) = claim else {
            connection.execute("ROLLBACK").await?;
            connection.close().await?;
            return Ok(None);
        };
        let mut bits = Bits::for_ids(ids);
        // Through a cursor, a page at a time: the day may not fit in memory
        // as rows.
        sqlx::query(READ_DAY)
            .bind(day)
            .execute(&mut connection)
            .await?;
        loop {
            let page: Vec<(i64, i64)> = sqlx::query_as(FETCH_PAGE)
                .fetch_all(&mut connection)
                .await?;
            for (h1, h2) in &page {
                bits.insert(*h1, *h2);
            }
            if page.is_empty() {
                break;
            }
        }
        connection.execute("COMMIT").await?;

        connection.execute("BEGIN").await?;
        // A statement's chunks at a time: the filter is in memory once.
        for (n, part) in bits
            .bytes
            .chunks(CHUNKS_PER_STATEMENT * CHUNK_BYTES)
            .enumerate()
        {
            let first = i32::try_from(n * CHUNKS_PER_STATEMENT).unwrap_or(i32::MAX);
            let rows: Vec<&[u8]> = part.chunks(CHUNK_BYTES).collect();
            sqlx::query("SELECT inbox_ledger_filter_chunks($1, $2, $3)")
                .bind(day)
                .bind(first)
                .bind(rows)
                .execute(&mut connection)
                .await?;
        }
        let chunks = i32::try_from(bits.chunks).unwrap_or(i32::MAX);
        sqlx::query("SELECT inbox_ledger_filter_publish($1, $2, $3, $4)")
            .bind(day)
            .bind(late_writes)
            .bind(ids)
            .bind(chunks)
            .execute(&mut connection)
            .await?;
        connection.execute("COMMIT").await?;
        connection.close().await?;
        Ok(Some(FilterBuilt {
            day,
            ids,
            chunks: bits.chunks,
            took: started.elapsed(),
        }))
    }
    .boxed()
}

/// How many closed days every batch looks up in full: no filter yet, or
/// one that missed a late write (the gauge `inbox_ledger_filters_stale`).
pub async fn unfiltered_days(pool: &PgPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(UNFILTERED_DAYS).fetch_one(pool).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_is_about_ten_bits_an_id() {
        assert_eq!(Bits::for_ids(0).chunks, 0);
        assert_eq!(Bits::for_ids(1).chunks, 1);
        let million = Bits::for_ids(1_000_000);
        assert_eq!(million.chunks, 316);
        assert!(million.bytes.len() * 8 >= 10_000_000);
    }

    #[test]
    fn an_id_sets_seven_bits_in_one_block() {
        let mut bits = Bits::for_ids(10_000);
        bits.insert(-0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321);
        let set: u32 = bits.bytes.iter().map(|b| b.count_ones()).sum();
        assert_eq!(set, 7, "b is odd: seven distinct bits");
        let first = bits.bytes.iter().position(|b| *b != 0).unwrap();
        let last = bits.bytes.iter().rposition(|b| *b != 0).unwrap();
        assert!(last - first < 64, "one block of 64 bytes: {first}..{last}");
    }
}
