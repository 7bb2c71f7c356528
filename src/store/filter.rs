//! The filter of each closed day of the ledger and the reservations
//! (docs/design.md#the-filter-of-closed-days): a blocked Bloom filter of the
//! day's message ids and of its reservations' order ids, built by
//! maintenance once the day is over and every transaction that could still
//! write it uncounted has ended, so that a batch looks an id (an order) up
//! on a closed day only when the filter may hold it. The database hashes
//! the keys (`uuid_hash_extended` of a message id, `hashtextextended` of an
//! order id, seeds 0 and 1) for the build as for the look-ups; this file
//! sets the bits that `inbox_ledger_seen` and `inbox_reservations_seen`
//! test (migrations/20261205000005_ledger_filter_slots.sql,
//! 20261207004001_reservation_filter.sql; 20261205000004 for the days
//! closed by the clock).

use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use futures::future::{BoxFuture, FutureExt};
use sqlx::{Connection as _, Executor as _, PgConnection};

use super::pooler::DbPool;

use super::StoreError;

const NEXT_DAY: &str = include_str!("../../sql/filter_next_day.sql");
const READ_DAY: &str = include_str!("../../sql/filter_read_day.sql");
const UNFILTERED_DAYS: &str = include_str!("../../sql/filter_unfiltered_days.sql");
const LAID_DAYS: &str = include_str!("../../sql/filter_laid_days.sql");
const FETCH_PAGE: &str = "FETCH 100000 FROM inbox_filter_ids";
/// A build or a lay-out reads a day of production traffic: minutes.
const NO_STATEMENT_TIMEOUT: &str = "SET LOCAL statement_timeout = 0";

/// Words of a chunk row of a day's filter: 3,968 bytes, two rows to a page.
const CHUNK_WORDS: usize = 496;
/// Bits of the filter per id at least (its words are a power of two, so 16
/// to 32), and bits set per id, in one 64-bit word: about 0.4 % false
/// positives at 16 bits an id, 0.03 % at 32 (at 10 to 20 it was 1.9 % to
/// 0.17 %: a false positive is a look-up of a closed day's key, a random
/// page of an index of gigabytes at production size).
const BITS_PER_ID: i64 = 16;
const BITS_PER_ID_SET: i64 = 7;
/// The most words a filter may have: its word is 31 bits of a hash.
const MAX_WORDS: u64 = 1 << 31;
/// Words of the largest day in a slot row: the slots are its words / 8, so
/// a row is at most 8 words a day (64 bytes).
const WIDEST_DAY_WORDS: i64 = 8;
/// Chunks, and slot rows, sent per statement (~4 MB).
const CHUNKS_PER_STATEMENT: usize = 1000;
const SLOTS_PER_STATEMENT: i64 = 4096;
/// How long a build waits for the transactions that could still write a
/// day just closed (batches of a few milliseconds), and how often it looks.
const READY_WAIT: Duration = Duration::from_secs(2);
const READY_POLL: Duration = Duration::from_millis(50);

/// A day's filter, built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterBuilt {
    pub day: NaiveDate,
    /// Keys in the filter: the day's message ids and order ids.
    pub ids: i64,
    /// Of them, the order ids of the day's reservations.
    pub orders: i64,
    /// 64-bit words: a power of two, 0 for a day that held no id.
    pub words: usize,
    pub took: Duration,
}

/// A register-blocked Bloom filter being built: a power of two of 64-bit
/// words, each id's 7 bits in one word.
struct Words {
    words: Vec<u64>,
}

impl Words {
    fn for_ids(ids: i64) -> Self {
        let needed = u64::try_from((ids * BITS_PER_ID + 63) / 64).unwrap_or(0);
        let len = if needed == 0 {
            0
        } else {
            needed.next_power_of_two().min(MAX_WORDS)
        };
        Self {
            words: vec![0; usize::try_from(len).unwrap_or(0)],
        }
    }

    /// Sets the bits of an id with hashes `h1`, `h2`: its word is the low 31
    /// bits of `h1` mod the words, its bits [`mask`] of `h2` (the arithmetic
    /// of `inbox_filter_mask` and sql/apply_batch.sql on the same signed
    /// 64-bit values).
    fn insert(&mut self, h1: i64, h2: i64) {
        if self.words.is_empty() {
            return;
        }
        let word = (h1 & 0x7fff_ffff) as usize % self.words.len();
        self.words[word] |= mask(h2);
    }

    /// The words as the chunk rows hold them: little-endian, 496 a row.
    fn chunk_rows(&self) -> Vec<Vec<u8>> {
        self.words
            .chunks(CHUNK_WORDS)
            .map(|chunk| chunk.iter().flat_map(|word| word.to_le_bytes()).collect())
            .collect()
    }
}

/// The bits an id sets in its word: bits 6i..6i+5 of `h2` for i in 0..7.
fn mask(h2: i64) -> u64 {
    (0..BITS_PER_ID_SET).fold(0, |mask, i| mask | 1 << ((h2 >> (6 * i)) & 63))
}

/// Builds the filter of the next closed day that has none, or one that
/// missed a late write; `None` when every closed day has a clean one, or
/// another instance is building one now. Its own connection, without the
/// statement timeout: a day of production traffic is minutes of reading.
pub fn build_next_filter(pool: &DbPool) -> BoxFuture<'_, Result<Option<FilterBuilt>, StoreError>> {
    // Boxed: the compiler cannot otherwise tell that the future is Send
    // for any lifetime of `pool` (a spawned task awaits it).
    async move {
        sqlx::query(super::schema::CLOSE_DAYS).execute(pool).await?;
        let Some(day) = next_ready_day(pool).await? else {
            lay_out(pool).await?;
            return Ok(None);
        };
        let started = Instant::now();
        let mut connection = pool.connect_own().await?;
        let Some((late_writes, ids, filter)) = read_day(pool, &mut connection, day).await? else {
            connection.close().await?;
            return Ok(None);
        };
        let words = publish(pool, &mut connection, day, (late_writes, ids), &filter).await?;
        // The slots once no other day is ready to build: each lay-out
        // writes every day's filter again.
        let another_ready = sqlx::query_as::<_, (NaiveDate, bool)>(NEXT_DAY)
            .fetch_optional(pool)
            .await?
            .is_some_and(|(_, ready)| ready);
        connection.close().await?;
        if !another_ready {
            lay_out(pool).await?;
        }
        Ok(Some(FilterBuilt {
            day,
            ids: ids.ids,
            orders: ids.orders,
            words,
            took: started.elapsed(),
        }))
    }
    .boxed()
}

/// The next closed day whose filter is to be built, once it is ready (no
/// transaction that could still write it is running), waiting for that at
/// most `READY_WAIT`; `None` when there is no such day, or it is not ready
/// in time.
async fn next_ready_day(pool: &DbPool) -> Result<Option<NaiveDate>, StoreError> {
    let waiting_since = Instant::now();
    loop {
        let Some((day, ready)) = sqlx::query_as::<_, (NaiveDate, bool)>(NEXT_DAY)
            .fetch_optional(pool)
            .await?
        else {
            return Ok(None);
        };
        if ready {
            return Ok(Some(day));
        }
        if waiting_since.elapsed() >= READY_WAIT {
            return Ok(None);
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

/// The late writes counted, the ids and the day's filter, in one
/// snapshot; `None` when another instance is building a filter now, or the
/// snapshot could still miss a write of the day.
async fn read_day(
    pool: &DbPool,
    connection: &mut PgConnection,
    day: NaiveDate,
) -> Result<Option<(i64, Ids, Words)>, StoreError> {
    // One snapshot for the count of late writes and the ids: a row it does
    // not hold was committed later, and counted as a late write then (a
    // transaction that could write the day uncounted is older than the
    // day's closed_xid, and the snapshot's oldest running one is not).
    connection
        .execute(
            pool.begin_statement(
                "ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                NO_STATEMENT_TIMEOUT,
            )
            .as_str(),
        )
        .await?;
    let claim: Option<(i64, i64, i64)> = sqlx::query_as(
        "SELECT f.late_writes, (SELECT count(*) FROM processed_inbox p WHERE p.event_day = $1),
                (SELECT count(*) FROM (SELECT DISTINCT r.order_id FROM order_reservation r
                                       WHERE r.reserved_day = $1) AS o)
         FROM inbox_ledger_filter f
         WHERE f.event_day = $1
           AND pg_snapshot_xmin(pg_current_snapshot()) >= f.closed_xid
           AND pg_try_advisory_xact_lock(hashtext('inventory-inbox:filter'))",
    )
    .bind(day)
    .persistent(pool.prepares())
    .fetch_optional(&mut *connection)
    .await?;
    let Some((late_writes, message_ids, orders)) = claim else {
        connection.execute("ROLLBACK").await?;
        return Ok(None);
    };
    let ids = Ids {
        ids: message_ids + orders,
        orders,
    };
    let mut filter = Words::for_ids(ids.ids);
    // Through a cursor, a page at a time: the day may not fit in memory
    // as rows.
    sqlx::query(READ_DAY)
        .bind(day)
        .persistent(pool.prepares())
        .execute(&mut *connection)
        .await?;
    loop {
        let page: Vec<(i64, i64)> = sqlx::query_as(FETCH_PAGE)
            .persistent(pool.prepares())
            .fetch_all(&mut *connection)
            .await?;
        for (h1, h2) in &page {
            filter.insert(*h1, *h2);
        }
        if page.is_empty() {
            break;
        }
    }
    connection.execute("COMMIT").await?;
    Ok(Some((late_writes, ids, filter)))
}

/// The keys a day's filter holds: its message ids and order ids together
/// (`ids`), and of them the order ids.
#[derive(Debug, Clone, Copy)]
struct Ids {
    ids: i64,
    orders: i64,
}

/// Writes the day's filter, a statement's chunks at a time (the filter is
/// in memory once), and publishes it in the same transaction. Returns its
/// words.
async fn publish(
    pool: &DbPool,
    connection: &mut PgConnection,
    day: NaiveDate,
    (late_writes, ids): (i64, Ids),
    filter: &Words,
) -> Result<usize, StoreError> {
    connection.execute(begin(pool).as_str()).await?;
    let rows = filter.chunk_rows();
    for (first, part) in statements(&rows) {
        sqlx::query("SELECT inbox_ledger_filter_chunks($1, $2, $3)")
            .bind(day)
            .bind(first)
            .bind(part)
            .persistent(pool.prepares())
            .execute(&mut *connection)
            .await?;
    }
    let words = filter.words.len();
    sqlx::query("SELECT inbox_ledger_filter_publish($1, $2, $3, $4, $5)")
        .bind(day)
        .bind(late_writes)
        .bind(ids.ids)
        .bind(ids.orders)
        .bind(i64::try_from(words).unwrap_or(i64::MAX))
        .persistent(pool.prepares())
        .execute(&mut *connection)
        .await?;
    connection.execute("COMMIT").await?;
    Ok(words)
}

/// The chunk rows a statement at a time, each part with the number of its
/// first chunk.
fn statements(rows: &[Vec<u8>]) -> impl Iterator<Item = (i32, &[Vec<u8>])> {
    rows.chunks(CHUNKS_PER_STATEMENT)
        .enumerate()
        .map(|(n, part)| {
            (
                i32::try_from(n * CHUNKS_PER_STATEMENT).unwrap_or(i32::MAX),
                part,
            )
        })
}

/// What begins a transaction of a build or a lay-out, on its own
/// connection ([`DbPool::connect_own`]: its long statements not logged as
/// slow): without the statement timeout (a day of production traffic is
/// minutes of reading), for the transaction only (a session's SET would
/// outlive it on a transaction pooler's server connection).
fn begin(pool: &DbPool) -> String {
    pool.begin_statement("", NO_STATEMENT_TIMEOUT)
}

/// A closed day's clean filter, as the slots lay it out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LaidDay {
    day: NaiveDate,
    built_at: DateTime<Utc>,
    words: i64,
}

/// A day of the layout in use and the build of its filter the slots hold.
type LaidBuild = (NaiveDate, DateTime<Utc>);

/// The closed days' clean filters to lay out, and the layout in use:
/// its generation, and its days with their builds.
async fn laid_days(
    connection: &mut PgConnection,
    prepares: bool,
) -> Result<(Vec<LaidDay>, Option<(i32, Vec<LaidBuild>)>), StoreError> {
    let days = sqlx::query_as::<_, (NaiveDate, DateTime<Utc>, i64)>(LAID_DAYS)
        .persistent(prepares)
        .fetch_all(&mut *connection)
        .await?
        .into_iter()
        .map(|(day, built_at, words)| LaidDay {
            day,
            built_at,
            words,
        })
        .collect();
    let in_use = sqlx::query_as::<_, (i32, Vec<NaiveDate>, Vec<DateTime<Utc>>)>(
        "SELECT generation, days, built_at FROM inbox_ledger_filter_layout",
    )
    .persistent(prepares)
    .fetch_optional(&mut *connection)
    .await?
    .map(|(generation, days, built)| (generation, days.into_iter().zip(built).collect()));
    Ok((days, in_use))
}

/// Whether the layout in use holds just these days' builds.
fn holds(in_use: &[LaidBuild], days: &[LaidDay]) -> bool {
    in_use.len() == days.len()
        && in_use
            .iter()
            .zip(days)
            .all(|(&laid, day)| laid == (day.day, day.built_at))
}

/// Lays the clean filters of the closed days out in the slots
/// (migrations/20261205000005_ledger_filter_slots.sql), unless the layout
/// in use holds just those: S slots, S the largest filter's words / 8; a
/// slot row holds each day's words s, s + S, ... (a day smaller than S: its
/// word s mod T). One transaction: a batch sees the old layout or the new.
async fn lay_out(pool: &DbPool) -> Result<(), StoreError> {
    let mut look = pool.begin().await?;
    let (days, in_use) = laid_days(&mut look, pool.prepares()).await?;
    look.commit().await?;
    if in_use
        .as_ref()
        .map_or(days.is_empty(), |(_, laid)| holds(laid, &days))
    {
        return Ok(());
    }
    let mut connection = pool.connect_own().await?;
    connection.execute(begin(pool).as_str()).await?;
    let locked: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext('inventory-inbox:filter'))")
            .persistent(pool.prepares())
            .fetch_one(&mut connection)
            .await?;
    // Read again under the lock: another instance may have laid them out.
    let (days, in_use) = laid_days(&mut connection, pool.prepares()).await?;
    let generation = match in_use {
        _ if !locked => None,
        Some((_, laid)) if holds(&laid, &days) => None,
        Some((generation, _)) => Some(generation.wrapping_add(1)),
        None => Some(1),
    };
    let Some(generation) = generation else {
        connection.execute("ROLLBACK").await?;
        connection.close().await?;
        return Ok(());
    };
    let layout = Layout::of(&days);
    for first in (0..layout.slots).step_by(SLOTS_PER_STATEMENT as usize) {
        let rows = layout
            .rows(&mut connection, pool.prepares(), &days, first)
            .await?;
        sqlx::query("SELECT inbox_ledger_filter_slots($1, $2, $3, $4)")
            .bind(generation)
            .bind(i32::try_from(first).unwrap_or(i32::MAX))
            .bind(layout.row_words)
            .bind(rows)
            .persistent(pool.prepares())
            .execute(&mut connection)
            .await?;
    }
    sqlx::query("SELECT inbox_ledger_filter_layout_publish($1, $2, $3, $4, $5, $6)")
        .bind(generation)
        .bind(layout.slots)
        .bind(days.iter().map(|d| d.day).collect::<Vec<_>>())
        .bind(days.iter().map(|d| d.built_at).collect::<Vec<_>>())
        .bind(&layout.offsets)
        .bind(&layout.widths)
        .persistent(pool.prepares())
        .execute(&mut connection)
        .await?;
    connection.execute("COMMIT").await?;
    connection.close().await?;
    Ok(())
}

/// Where each day's words go in a slot row.
struct Layout {
    /// S: a power of two, at most the largest day's words.
    slots: i64,
    /// Words of each day before its own in a row, and its own in a row.
    offsets: Vec<i32>,
    widths: Vec<i32>,
    row_words: i32,
}

impl Layout {
    fn of(days: &[LaidDay]) -> Self {
        let largest = days.iter().map(|d| d.words).max().unwrap_or(1);
        let slots = (largest / WIDEST_DAY_WORDS).max(1);
        let widths: Vec<i32> = days
            .iter()
            .map(|d| i32::try_from((d.words / slots).max(1)).unwrap_or(i32::MAX))
            .collect();
        let offsets = widths
            .iter()
            .scan(0, |before, width| {
                let offset = *before;
                *before += width;
                Some(offset)
            })
            .collect();
        Self {
            slots,
            offsets,
            widths: widths.clone(),
            row_words: widths.iter().sum::<i32>().max(1),
        }
    }

    /// Slot rows [first, first + n) one after the other, n the statement's
    /// share: of each day, slot s's words are its words s + mS (m below its
    /// width), or for a day smaller than S its word s mod T. S, n, T are
    /// powers of two and `first` a multiple of n, so each range read is
    /// contiguous.
    async fn rows(
        &self,
        connection: &mut PgConnection,
        prepares: bool,
        days: &[LaidDay],
        first: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let n = SLOTS_PER_STATEMENT.min(self.slots);
        let row_words = self.row_words as usize;
        let mut rows = vec![0i64; n as usize * row_words];
        for ((day, offset), width) in days.iter().zip(&self.offsets).zip(&self.widths) {
            for m in 0..i64::from(*width) {
                let (start, len) = if day.words >= self.slots {
                    (first + m * self.slots, n)
                } else {
                    (first % day.words, n.min(day.words))
                };
                let words = read_words(connection, prepares, day.day, start, len).await?;
                for k in 0..n as usize {
                    let word = words[k % words.len()];
                    rows[k * row_words + *offset as usize + m as usize] = word as i64;
                }
            }
        }
        Ok(rows)
    }
}

/// Words [start, start + len) of a day's filter.
async fn read_words(
    connection: &mut PgConnection,
    prepares: bool,
    day: NaiveDate,
    start: i64,
    len: i64,
) -> Result<Vec<u64>, StoreError> {
    let chunk_words = CHUNK_WORDS as i64;
    let first_chunk = start / chunk_words;
    let last_chunk = (start + len - 1) / chunk_words;
    let chunks: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT bits FROM inbox_ledger_filter_chunk
         WHERE event_day = $1 AND chunk BETWEEN $2 AND $3 ORDER BY chunk",
    )
    .bind(day)
    .bind(i32::try_from(first_chunk).unwrap_or(i32::MAX))
    .bind(i32::try_from(last_chunk).unwrap_or(i32::MAX))
    .persistent(prepares)
    .fetch_all(&mut *connection)
    .await?;
    let skip = (start - first_chunk * chunk_words) as usize;
    let words: Vec<u64> = chunks
        .iter()
        .flat_map(|chunk| chunk.chunks_exact(8))
        .map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
        .skip(skip)
        .take(len as usize)
        .collect();
    if words.len() as i64 != len {
        return Err(StoreError::Schema(format!(
            "the filter of {day} has no words {start}..{}",
            start + len
        )));
    }
    Ok(words)
}

/// How many closed days every batch looks up in full: no filter yet, or
/// one that missed a late write (the gauge `inbox_ledger_filters_stale`).
pub async fn unfiltered_days(pool: &DbPool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(UNFILTERED_DAYS).fetch_one(pool).await?)
}

#[cfg(test)]
mod tests {
    use sqlx::postgres::PgConnectOptions;

    use super::super::pooler::{Limits, Pooler};
    use super::*;

    #[test]
    fn a_filter_is_sixteen_to_thirty_two_bits_an_id_in_a_power_of_two_of_words() {
        assert_eq!(Words::for_ids(0).words.len(), 0);
        assert_eq!(Words::for_ids(1).words.len(), 1);
        for ids in [1_000_i64, 1_000_000, 121_000_000] {
            let words = Words::for_ids(ids).words.len() as i64;
            assert!(words.count_ones() == 1, "{words}");
            assert!((16..32).contains(&(words * 64 / ids)), "{ids}: {words}");
        }
    }

    #[test]
    fn an_id_sets_up_to_seven_bits_in_one_word() {
        let mut filter = Words::for_ids(10_000);
        filter.insert(-0x1234_5678_9abc_def0, 0x0fed_cba9_8765_4321);
        let set: Vec<_> = filter.words.iter().filter(|w| **w != 0).collect();
        assert_eq!(set.len(), 1, "one word");
        assert_eq!(*set[0], mask(0x0fed_cba9_8765_4321));
        assert!((1..=7).contains(&set[0].count_ones()));
        // The word: the low 31 bits of h1 mod the words (4,096 here).
        let word = filter.words.iter().position(|w| *w != 0).unwrap();
        assert_eq!(word, (0x6543_2110 & 0x7fff_ffff) % 4096);
    }

    #[test]
    fn the_mask_takes_six_bits_of_h2_at_a_time() {
        // Bits 0..6 of h2 name bit 5, the next six bit 1, the others bit 0.
        assert_eq!(mask(5 | (1 << 6)), (1 << 5) | (1 << 1) | 1);
        // A negative h2 shifts in ones above bit 63, never into the 42 read.
        assert_eq!(mask(-1), 1 << 63);
    }

    #[test]
    fn each_statement_of_a_filter_names_its_first_chunk() {
        // A day of production traffic is tens of thousands of chunks.
        let rows = vec![Vec::new(); 2 * CHUNKS_PER_STATEMENT + 5];
        let parts: Vec<_> = statements(&rows)
            .map(|(first, part)| (first, part.len()))
            .collect();
        assert_eq!(parts, [(0, 1000), (1000, 1000), (2000, 5)]);
    }

    #[test]
    fn a_build_begins_a_transaction_without_the_statement_timeout() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        for pooler in [Pooler::None, Pooler::Session, Pooler::Transaction] {
            let limits = Limits {
                statement_timeout: Duration::from_secs(30),
                lock_timeout: Duration::from_secs(1),
            };
            let pool = DbPool::new(PgConnectOptions::new(), pooler, limits, 1);
            let begin = begin(&pool);
            assert!(begin.starts_with("BEGIN"), "{pooler:?}: {begin}");
            assert!(
                begin.ends_with("; SET LOCAL statement_timeout = 0"),
                "{pooler:?}: {begin}"
            );
        }
    }

    fn laid(words: i64) -> LaidDay {
        LaidDay {
            day: NaiveDate::MIN,
            built_at: DateTime::UNIX_EPOCH,
            words,
        }
    }

    #[test]
    fn the_largest_day_has_eight_words_a_slot_and_a_small_one_one() {
        let layout = Layout::of(&[laid(1 << 21), laid(1 << 4), laid(1 << 19)]);
        assert_eq!(layout.slots, 1 << 18);
        assert_eq!(layout.widths, [8, 1, 2]);
        assert_eq!(layout.offsets, [0, 8, 9]);
        assert_eq!(layout.row_words, 11);
        let tiny = Layout::of(&[laid(1), laid(2)]);
        assert_eq!((tiny.slots, tiny.widths.as_slice()), (1, &[1, 2][..]));
    }
}
