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
const FETCH_PAGE: &str = "FETCH 100000 FROM inbox_filter_words";
/// A build or a lay-out reads a day of production traffic: minutes.
const NO_STATEMENT_TIMEOUT: &str = "SET LOCAL statement_timeout = 0";

/// Words of a chunk row of a day's filter: 3,968 bytes, two rows to a page.
const CHUNK_WORDS: usize = 496;
/// Bits of the filter per id at least (its words are a power of two, so 16
/// to 32); an id sets 7 bits (`inbox_filter_mask`) in one 64-bit word:
/// about 0.4 % false positives at 16 bits an id, 0.03 % at 32 (at 10 to 20
/// it was 1.9 % to 0.17 %: a false positive is a look-up of a closed day's
/// key, a random page of an index of gigabytes at production size).
const BITS_PER_ID: i64 = 16;
/// The most words a filter may have: its word is 31 bits of a hash.
const MAX_WORDS: u64 = 1 << 31;
/// Words of the largest day in a slot row: the slots are its words / 8, so
/// a row is at most 8 words a day (64 bytes).
const WIDEST_DAY_WORDS: i64 = 8;
/// Words of a filter, as chunks, and slot rows sent per statement (~4 MB).
const WORDS_PER_STATEMENT: i64 = 1000 * CHUNK_WORDS as i64;
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

/// The words of a filter of `ids` keys: a power of two, at least
/// `BITS_PER_ID` bits a key; 0 for a day that held none.
fn words_for(ids: i64) -> i64 {
    let needed = u64::try_from((ids * BITS_PER_ID + 63) / 64).unwrap_or(0);
    if needed == 0 {
        return 0;
    }
    i64::try_from(needed.next_power_of_two().min(MAX_WORDS)).unwrap_or(i64::MAX)
}

/// Builds the filter of the next closed day that has none, or one that
/// missed a late write or was built without order ids; `None` when every
/// closed day has a clean one, or another instance is building one now.
/// Its own connections, without the statement timeout: a day of
/// production traffic is minutes of reading.
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
        let Some((ids, words)) = build_day(pool, day).await? else {
            return Ok(None);
        };
        // The slots once no other day is ready to build: each lay-out
        // writes every day's filter again.
        let another_ready = sqlx::query_as::<_, (NaiveDate, bool)>(NEXT_DAY)
            .fetch_optional(pool)
            .await?
            .is_some_and(|(_, ready)| ready);
        if !another_ready {
            lay_out(pool).await?;
        }
        Ok(Some(FilterBuilt {
            day,
            ids: ids.ids,
            orders: ids.orders,
            words: usize::try_from(words).unwrap_or(usize::MAX),
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

/// The keys a day's filter holds: its message ids and order ids together
/// (`ids`), and of them the order ids.
#[derive(Debug, Clone, Copy)]
struct Ids {
    ids: i64,
    orders: i64,
}

/// Builds and publishes a day's filter: reads the day in one snapshot on
/// one connection (the count of late writes, the keys, the words the
/// database makes of them) while another writes the words, a statement's
/// at a time, and publishes them in one transaction (a batch sees the old
/// filter or the new). The builder holds one statement's words (~4 MB),
/// never the filter (512 MB at 121 million events a day). `None` when
/// another instance is building a filter now, or the snapshot could still
/// miss a write of the day.
async fn build_day(pool: &DbPool, day: NaiveDate) -> Result<Option<(Ids, i64)>, StoreError> {
    let mut read = pool.connect_own().await?;
    let Some((late_writes, ids)) = claim_day(pool, &mut read, day).await? else {
        read.close().await?;
        return Ok(None);
    };
    let words = words_for(ids.ids);
    let mut write = pool.connect_own().await?;
    write.execute(begin(pool).as_str()).await?;
    sqlx::query(READ_DAY)
        .bind(day)
        .bind(words)
        .persistent(pool.prepares())
        .execute(&mut read)
        .await?;
    let mut parts = Parts::of(words);
    loop {
        let page: Vec<(i64, i64)> = sqlx::query_as(FETCH_PAGE)
            .persistent(pool.prepares())
            .fetch_all(&mut read)
            .await?;
        if page.is_empty() {
            break;
        }
        for (word, bits) in page {
            while let Some(full) = parts.full_before(word) {
                write_part(pool, &mut write, day, &full).await?;
            }
            parts.set(day, word, bits as u64)?;
        }
    }
    for part in parts.rest() {
        write_part(pool, &mut write, day, &part).await?;
    }
    sqlx::query("SELECT inbox_ledger_filter_publish($1, $2, $3, $4, $5)")
        .bind(day)
        .bind(late_writes)
        .bind(ids.ids)
        .bind(ids.orders)
        .bind(words)
        .persistent(pool.prepares())
        .execute(&mut write)
        .await?;
    // Published before the read ends, under the read's lock: no other
    // instance builds the day meanwhile.
    write.execute("COMMIT").await?;
    read.execute("COMMIT").await?;
    write.close().await?;
    read.close().await?;
    Ok(Some((ids, words)))
}

/// Begins the read of a day (repeatable read: one snapshot for the count
/// of late writes and the keys) and claims the build; the late writes
/// counted and the keys, or `None` (rolled back) when another instance is
/// building a filter now or the snapshot could still miss a write of the
/// day.
async fn claim_day(
    pool: &DbPool,
    read: &mut PgConnection,
    day: NaiveDate,
) -> Result<Option<(i64, Ids)>, StoreError> {
    // A row the snapshot does not hold was committed later, and counted as
    // a late write then (a transaction that could write the day uncounted
    // is older than the day's closed_xid, and the snapshot's oldest
    // running one is not).
    read.execute(
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
    .fetch_optional(&mut *read)
    .await?;
    let Some((late_writes, message_ids, orders)) = claim else {
        read.execute("ROLLBACK").await?;
        return Ok(None);
    };
    let ids = Ids {
        ids: message_ids + orders,
        orders,
    };
    Ok(Some((late_writes, ids)))
}

/// A statement's share of a filter's words: `words` from word `first`.
#[derive(Debug, PartialEq, Eq)]
struct Part {
    first: i64,
    words: Vec<u64>,
}

impl Part {
    /// The part from `first` of a filter of `total` words, all clear.
    fn at(first: i64, total: i64) -> Self {
        let len = (total - first).clamp(0, WORDS_PER_STATEMENT);
        Self {
            first,
            words: vec![0; usize::try_from(len).unwrap_or(0)],
        }
    }

    fn end(&self) -> i64 {
        self.first + self.words.len() as i64
    }

    /// The number of its first chunk, and its chunk rows: 496 words
    /// little-endian a row, the last maybe shorter.
    fn chunk_rows(&self) -> (i32, Vec<Vec<u8>>) {
        let first = i32::try_from(self.first / CHUNK_WORDS as i64).unwrap_or(i32::MAX);
        let rows = self
            .words
            .chunks(CHUNK_WORDS)
            .map(|chunk| chunk.iter().flat_map(|word| word.to_le_bytes()).collect())
            .collect();
        (first, rows)
    }
}

/// The parts of a filter of `total` words as its words come, in order: the
/// database sends each word that holds a key once, with its bits.
struct Parts {
    total: i64,
    current: Part,
}

impl Parts {
    fn of(total: i64) -> Self {
        Self {
            total,
            current: Part::at(0, total),
        }
    }

    /// The part being filled, once `word` lies past it, and the next one
    /// begun (a part no word came for is written clear); `None` once the
    /// part being filled holds `word`.
    fn full_before(&mut self, word: i64) -> Option<Part> {
        if word < self.current.end() || self.current.end() >= self.total {
            return None;
        }
        let next = Part::at(self.current.end(), self.total);
        Some(std::mem::replace(&mut self.current, next))
    }

    /// Sets a word of the part being filled: one [`Parts::full_before`]
    /// let go holds it.
    fn set(&mut self, day: NaiveDate, word: i64, bits: u64) -> Result<(), StoreError> {
        let at = usize::try_from(word - self.current.first)
            .ok()
            .filter(|at| *at < self.current.words.len())
            .ok_or_else(|| {
                StoreError::Schema(format!(
                    "the filter of {day} was sent word {word} of {} out of order",
                    self.total
                ))
            })?;
        self.current.words[at] = bits;
        Ok(())
    }

    /// The part being filled and the ones after it, to the last word.
    fn rest(self) -> impl Iterator<Item = Part> {
        let total = self.total;
        let after = self.current.end();
        std::iter::once(self.current)
            .filter(|part| !part.words.is_empty())
            .chain(
                (after..total)
                    .step_by(WORDS_PER_STATEMENT as usize)
                    .map(move |first| Part::at(first, total)),
            )
    }
}

/// Writes a part of a day's filter as chunk rows.
async fn write_part(
    pool: &DbPool,
    write: &mut PgConnection,
    day: NaiveDate,
    part: &Part,
) -> Result<(), StoreError> {
    let (first, rows) = part.chunk_rows();
    sqlx::query("SELECT inbox_ledger_filter_chunks($1, $2, $3)")
        .bind(day)
        .bind(first)
        .bind(rows)
        .persistent(pool.prepares())
        .execute(&mut *write)
        .await?;
    Ok(())
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
        assert_eq!(words_for(0), 0);
        assert_eq!(words_for(1), 1);
        for ids in [1_000_i64, 1_000_000, 242_000_000] {
            let words = words_for(ids);
            assert!(words.count_ones() == 1, "{words}");
            assert!((16..32).contains(&(words * 64 / ids)), "{ids}: {words}");
        }
    }

    #[test]
    fn the_words_are_written_a_statement_at_a_time_clear_where_none_came() {
        let day = NaiveDate::MIN;
        let total = 2 * WORDS_PER_STATEMENT + 5;
        let mut parts = Parts::of(total);
        let mut written = Vec::new();
        // A part's first word is the part's, not the one before's.
        let words = [
            (3, 0b101),
            (WORDS_PER_STATEMENT, 9),
            (2 * WORDS_PER_STATEMENT + 1, 7),
        ];
        for (word, bits) in words {
            while let Some(full) = parts.full_before(word) {
                written.push(full);
            }
            parts.set(day, word, bits).expect("in order");
        }
        assert!(parts.set(day, 2, 1).is_err(), "a word sent out of order");
        assert!(parts.set(day, total, 1).is_err(), "a word past the filter");
        written.extend(parts.rest());
        let shape: Vec<_> = written
            .iter()
            .map(|part| (part.first, part.words.len(), part.chunk_rows().0))
            .collect();
        assert_eq!(
            shape,
            [
                (0, 496_000, 0),
                (WORDS_PER_STATEMENT, 496_000, 1000),
                (2 * WORDS_PER_STATEMENT, 5, 2000)
            ]
        );
        assert_eq!(written[0].words[3], 0b101);
        assert_eq!(written[1].words[0], 9);
        assert!(written[1].words[1..].iter().all(|word| *word == 0), "clear");
        assert_eq!(written[2].words, [0, 7, 0, 0, 0]);
        let (_, rows) = written[2].chunk_rows();
        assert_eq!(
            rows,
            [[0u64, 7, 0, 0, 0]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect::<Vec<u8>>()]
        );
        // A day that held no key: no word, no part.
        assert_eq!(Parts::of(0).rest().count(), 0);
        // Words that end in the last part: the parts after are written clear.
        let mut early = Parts::of(total);
        early.set(day, 1, 1).expect("in order");
        assert_eq!(
            early.rest().map(|part| part.first).collect::<Vec<_>>(),
            [0, WORDS_PER_STATEMENT, 2 * WORDS_PER_STATEMENT]
        );
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
