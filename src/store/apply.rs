//! The batch writer: the batch statement (`sql/apply_batch.sql`), one
//! statement per batch, its own transaction, so a batch costs one round
//! trip to PostgreSQL; its typed arguments (a record, an order line, a
//! partition: one composite type each), the outcome it returns, the
//! splitting of a batch the database refuses until the refused records are
//! isolated, and the connections it keeps between batches.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{FromRow, Postgres, Row};
use uuid::Uuid;

use crate::batch::{Batch, Classified, Disposition, Part, PartitionKey};
use crate::event::{self, ParkReason, MAX_PAYLOAD_BYTES};
use crate::parked::{self, ParkedRow};

use super::position_guard::PositionGuard;
use super::{DbPool, RetryReason, StoreError};

const APPLY_BATCH: &str = include_str!("../../sql/apply_batch.sql");

/// How often a batch is run again at once because a concurrent batch
/// committed first (`StoreError::Raced`), before it is retried as a
/// transient failure.
pub(super) const MAX_RACES: u32 = 5;

/// What a batch did, for metrics, logs and the DLQ, and what to commit.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BatchOutcome {
    /// Fresh events applied (including business duplicates).
    pub processed: u64,
    /// Fresh events whose every order line was already reserved.
    pub business_duplicates: u64,
    /// Records whose message id was already in the ledger or earlier in the
    /// batch: no effect.
    pub duplicates: u64,
    pub lines_reserved: u64,
    pub lines_rejected: u64,
    /// Rows parked by this batch (not those already parked by an earlier
    /// delivery of the same record).
    pub newly_parked: Vec<ParkedRow>,
    /// Event times of the fresh events, for end-to-end latency.
    pub fresh_event_times: Vec<DateTime<Utc>>,
    /// Event times of the duplicates whose ledger row is the record's own
    /// (same position): applied by an earlier try of this very batch, when
    /// its answer was lost, or by an earlier delivery of the record.
    pub same_record_duplicates: Vec<DateTime<Utc>>,
    /// Records parked by an earlier try or delivery at their position.
    pub parked_before: Vec<ParkedRow>,
    /// Per partition, the offset to commit to Kafka: the batch's next
    /// offsets, given only once its database transaction committed (none
    /// for a replay, which moves no position).
    pub to_commit: BTreeMap<PartitionKey, i64>,
    /// The round trip of each batch statement that committed (one a
    /// batch; more when it was applied in parts): sent → its answer, the
    /// commit included.
    pub statement_times: Vec<Duration>,
    /// Each record's decision, in poll order, only while the decision log
    /// is on ([`DECISIONS`]): nothing is gathered for it
    /// otherwise.
    pub decisions: Vec<Decision>,
}

/// The target of the decision log: one line per record, at `debug`, with
/// what its batch decided (processed, duplicate, business duplicate, id
/// conflict, parked). Off at the default level (`info`); on with
/// `RUST_LOG=info,inventory_inbox::decision=debug`. Here, below the
/// observer that writes it (`crate::observe`), because a batch asks it
/// whether to gather its decisions at all.
pub const DECISIONS: &str = "inventory_inbox::decision";

/// Whether the decision log is on: a batch gathers its decisions only then.
fn decisions_logged() -> bool {
    tracing::enabled!(target: DECISIONS, tracing::Level::DEBUG)
}

/// What a batch decided for one record, for its line of the decision log.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub outcome: DecisionOutcome,
    pub message_id: Option<Uuid>,
    pub order_id: Option<String>,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// A duplicate whose ledger row is the record's own (its position):
    /// processed by an earlier try whose answer was lost, if this batch's
    /// was.
    pub own_write: bool,
}

/// A record's outcome (SPEC §6), with a parked record's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionOutcome {
    Processed,
    Duplicate,
    BusinessDuplicate,
    Parked(ParkReason),
}

impl DecisionOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionOutcome::Processed => "processed",
            DecisionOutcome::Duplicate => "duplicate",
            DecisionOutcome::BusinessDuplicate => "business_duplicate",
            DecisionOutcome::Parked(ParkReason::EventIdConflict) => "id_conflict",
            DecisionOutcome::Parked(_) => "parked",
        }
    }
}

impl BatchOutcome {
    /// Adds another batch's outcome to this one.
    pub fn absorb(&mut self, other: BatchOutcome) {
        self.processed += other.processed;
        self.business_duplicates += other.business_duplicates;
        self.duplicates += other.duplicates;
        self.lines_reserved += other.lines_reserved;
        self.lines_rejected += other.lines_rejected;
        self.newly_parked.extend(other.newly_parked);
        self.fresh_event_times.extend(other.fresh_event_times);
        self.same_record_duplicates
            .extend(other.same_record_duplicates);
        self.parked_before.extend(other.parked_before);
        for (key, next) in other.to_commit {
            let entry = self.to_commit.entry(key).or_insert(next);
            *entry = (*entry).max(next);
        }
        self.statement_times.extend(other.statement_times);
        self.decisions.extend(other.decisions);
    }

    /// The outcome of a batch whose earlier try may have committed with its
    /// answer lost (a connection cut, no answer in time): what that try
    /// did is counted as this batch's doing (the records' own ledger rows as
    /// processed, their parked rows as parked now), since no other answer
    /// said so. Order lines are not recounted.
    pub fn after_lost_answer(mut self) -> Self {
        let own = std::mem::take(&mut self.same_record_duplicates);
        self.processed += own.len() as u64;
        self.duplicates = self.duplicates.saturating_sub(own.len() as u64);
        self.fresh_event_times.extend(own);
        self.newly_parked
            .extend(std::mem::take(&mut self.parked_before));
        for decision in &mut self.decisions {
            if decision.own_write {
                decision.outcome = DecisionOutcome::Processed;
            }
        }
        self
    }
}

/// Writes batches: one statement each, on connections it keeps between
/// them. Shared by concurrent batches (of distinct partitions): each takes
/// its own connection.
#[derive(Debug)]
pub struct BatchWriter {
    pool: DbPool,
    /// The ledger's `consumer`: stable across pods and restarts, so a replay
    /// under a new group id is still recognised.
    consumer: String,
    /// Whether parked records are copied to a DLQ topic: their rows then
    /// owe a copy until it is sent (`inbox_parked.dlq_sent_at`).
    dlq_copies: bool,
    /// Connections kept out of the pool between batches: sqlx checks a
    /// connection returned to its pool with a round trip (a Sync), which
    /// would double the cost of a batch. A batch takes one (or a new one
    /// from the pool) and puts it back unless the database failed on it.
    idle: Mutex<Vec<PoolConnection<Postgres>>>,
}

impl BatchWriter {
    pub fn new(pool: DbPool, consumer: String, dlq_copies: bool) -> Self {
        BatchWriter {
            pool,
            consumer,
            dlq_copies,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Applies the batch exactly once, its positions checked against
    /// `guard`'s; when the database refuses it for a non-transient
    /// reason, splits it in halves (in order) until the refused records are
    /// isolated, and parks each of those as `db_rejected`. A batch the
    /// statement asks to split is applied in two parts; one that raced a
    /// concurrent batch is applied again. A failure after some parts
    /// committed is `PartlyApplied`, so that the retry counts what they did
    /// (a database that went back is said as such: its batches are read
    /// again from the database's position). The outcome carries the
    /// batch's offsets to commit.
    pub async fn apply(
        &self,
        batch: &Batch,
        guard: &PositionGuard,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let mut committed = false;
        let mut outcome = self
            .apply_parts(batch.whole(), guard, trace_id, &mut committed)
            .await
            .map_err(|error| match error {
                StoreError::PositionBehind(_) => error,
                error if committed => StoreError::PartlyApplied(Box::new(error)),
                error => error,
            })?;
        outcome.to_commit = batch.next_offsets().clone();
        Ok(outcome)
    }

    /// [`BatchWriter::apply`]'s parts; `committed` turns true once one of
    /// them committed.
    async fn apply_parts(
        &self,
        batch: Part<'_>,
        guard: &PositionGuard,
        trace_id: Option<&str>,
        committed: &mut bool,
    ) -> Result<BatchOutcome, StoreError> {
        let mut outcome = BatchOutcome::default();
        let mut races = 0;
        // Work list of parts still to apply, in offset order.
        let mut pending: Vec<Part<'_>> = vec![batch];
        while let Some(part) = pending.pop() {
            match self.apply_once(&part, guard, trace_id).await {
                Ok(done) => {
                    *committed = true;
                    outcome.absorb(done);
                }
                Err(StoreError::Raced { message }) => {
                    races += 1;
                    if races > MAX_RACES {
                        return Err(StoreError::Transient {
                            reason: RetryReason::SerializationFailure,
                            message,
                        });
                    }
                    tracing::debug!(%message, "a concurrent batch committed first; applying again");
                    pending.push(part);
                }
                Err(StoreError::SplitBefore { ord }) if (2..=part.len()).contains(&ord) => {
                    let (first, second) = part.split_at(ord - 1);
                    pending.push(second);
                    pending.push(first);
                }
                Err(StoreError::Rejected { sqlstate, message }) => {
                    if let [item] = part.items() {
                        let rejected = reject(item, &sqlstate, &message);
                        match self
                            .apply_once(&Part::of(std::slice::from_ref(&rejected)), guard, trace_id)
                            .await
                        {
                            Ok(done) => {
                                *committed = true;
                                outcome.absorb(done);
                            }
                            // Even its parked row was refused: what the record
                            // carries cannot be stored. Its position, the reason
                            // and the database's words are, and the partition
                            // moves on (a record never stops a partition).
                            Err(StoreError::Rejected {
                                sqlstate: refused, ..
                            }) => {
                                let minimal = reject_bare(item, &sqlstate, &message, &refused);
                                outcome.absorb(
                                    self.apply_once(
                                        &Part::of(std::slice::from_ref(&minimal)),
                                        guard,
                                        trace_id,
                                    )
                                    .await?,
                                );
                                *committed = true;
                            }
                            Err(other) => return Err(other),
                        }
                    } else {
                        let (first, second) = part.split_at(part.len() / 2);
                        pending.push(second);
                        pending.push(first);
                    }
                }
                Err(other) => return Err(other),
            }
        }
        Ok(outcome)
    }

    /// The part in one statement, its own transaction: one round trip. It
    /// also moves the part's partitions' positions.
    async fn apply_once(
        &self,
        part: &Part<'_>,
        guard: &PositionGuard,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let positions = part.next_offsets();
        let idle = self.idle.lock().expect("idle lock").pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => {
                self.pool
                    .with_answer_deadline(async { Ok(self.pool.acquire().await?) })
                    .await?
            }
        };
        let partitions = partition_arguments(positions, guard);
        let sent = Instant::now();
        let result = self
            .pool
            .with_answer_deadline(self.apply_alone(
                &mut connection,
                part.items(),
                partitions,
                trace_id,
            ))
            .await;
        let round_trip = sent.elapsed();
        if matches!(
            result,
            Err(StoreError::Transient {
                reason: RetryReason::DatabaseTimeout,
                ..
            })
        ) {
            // Its answer may still come: the connection is closed, never
            // used again.
            drop(connection.detach());
            return result;
        }
        let result = match result {
            Ok(mut outcome) => {
                guard.wrote(positions);
                outcome.statement_times.push(round_trip);
                Ok(outcome)
            }
            Err(StoreError::PositionBehind(_)) => Err(guard
                .refused_behind(positions.keys().cloned().collect())
                .await),
            Err(other) => Err(other),
        };
        // After a refused statement the connection is as good as before;
        // after any other failure the pool checks it, or replaces it.
        if matches!(
            result,
            Ok(_)
                | Err(StoreError::Rejected { .. }
                    | StoreError::MissingPartition { .. }
                    | StoreError::PositionBehind(_)
                    | StoreError::SplitBefore { .. }
                    | StoreError::Raced { .. })
        ) {
            self.idle.lock().expect("idle lock").push(connection);
        }
        result
    }

    /// The batch statement as its own transaction: implicit, one round trip
    /// (directly, or through a session pooler); through a transaction
    /// pooler an explicit one, begun with the session's limits, in which the
    /// unnamed statement's two exchanges keep their server connection.
    async fn apply_alone(
        &self,
        connection: &mut sqlx::PgConnection,
        items: &[Classified],
        partitions: Vec<PartitionArgument<'_>>,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let statement = self.statement();
        if self.pool.prepares() {
            return statement.run(connection, items, partitions, trace_id).await;
        }
        let mut transaction = self.pool.begin_on(connection).await?;
        let outcome = statement
            .run(&mut transaction, items, partitions, trace_id)
            .await?;
        transaction.commit().await?;
        Ok(outcome)
    }

    /// The batch statement as this writer runs it.
    fn statement(&self) -> Statement<'_> {
        Statement {
            consumer: &self.consumer,
            dlq_copies: self.dlq_copies,
            prepares: self.pool.prepares(),
        }
    }

    /// Applies `batch` as one statement the way `apply` does, under
    /// `EXPLAIN (ANALYZE, BUFFERS, SUMMARY, FORMAT JSON)`, and returns the
    /// plan with its `Steps`: the milliseconds of each step of the batch
    /// function, by name, as it timed them when asked to
    /// (`inbox.step_times`; `inbox-loadgen profile`, docs/benchmarks.md).
    /// `generic`: the plans the service runs (prepared once per
    /// connection, one plan for every batch), else ones planned for this
    /// batch's values. The batch is applied and committed as by `apply`;
    /// the positions it wrote are not remembered (the next batch is not
    /// checked against them).
    pub async fn explain(
        &self,
        batch: &Batch,
        guard: &PositionGuard,
        generic: bool,
    ) -> Result<serde_json::Value, StoreError> {
        const EXPLAIN: &str = "EXPLAIN (ANALYZE, BUFFERS, SUMMARY, FORMAT JSON)";
        const PREPARED: &str = "inbox_explained_batch";
        const EXECUTE_WITH_LITERALS: &str =
            "SELECT format('EXECUTE inbox_explained_batch(%L, %L, %L, %L, %L, %L)', \
             $1::text, $2::inbox_batch_record[], $3::inbox_batch_line[], \
             $4::inbox_batch_partition[], $5::text, $6::boolean)";
        let partitions = partition_arguments(batch.next_offsets(), guard);
        let arguments = Arguments::new(batch.items(), partitions);
        let statement = self.statement();
        let mut connection = self.pool.acquire().await?;
        sqlx::raw_sql("BEGIN; SET LOCAL inbox.step_times = on")
            .execute(&mut *connection)
            .await?;
        let row = if generic {
            let prepared: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pg_prepared_statements WHERE name = $1")
                    .bind(PREPARED)
                    .fetch_one(&mut *connection)
                    .await?;
            if prepared == 0 {
                // The statement casts each argument: its types need no list.
                sqlx::raw_sql(&format!(
                    "SET plan_cache_mode = force_generic_plan; PREPARE {PREPARED} AS {APPLY_BATCH}"
                ))
                .execute(&mut *connection)
                .await?;
            }
            // EXECUTE takes no parameters of its own: the arguments go in as
            // literals, which the database writes.
            let execute: String = statement
                .query(EXECUTE_WITH_LITERALS, &arguments, None)
                .fetch_one(&mut *connection)
                .await?
                .try_get(0)?;
            sqlx::raw_sql(&format!("{EXPLAIN} {execute}"))
                .fetch_one(&mut *connection)
                .await?
        } else {
            statement
                .query(&format!("{EXPLAIN} {APPLY_BATCH}"), &arguments, None)
                .fetch_one(&mut *connection)
                .await?
        };
        let mut plan: serde_json::Value = row.try_get(0)?;
        let steps: Option<String> =
            sqlx::query_scalar("SELECT current_setting('inbox.step_times_of_batch', true)")
                .fetch_one(&mut *connection)
                .await?;
        sqlx::raw_sql("COMMIT").execute(&mut *connection).await?;
        let steps = steps
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| StoreError::Unexpected {
                sqlstate: String::new(),
                message: format!("the batch function's step times: {e}"),
            })?
            .unwrap_or(serde_json::Value::Null);
        plan[0]["Steps"] = steps;
        Ok(plan)
    }
}

/// The batch statement as one consumer runs it: its arguments other than
/// the batch's own.
pub(super) struct Statement<'a> {
    /// The ledger's consumer ($1).
    pub consumer: &'a str,
    /// Whether the rows it parks owe a DLQ copy ($6).
    pub dlq_copies: bool,
    /// Prepared once per connection (not through a transaction pooler).
    pub prepares: bool,
}

impl Statement<'_> {
    /// The batch statement on the given connection: its own transaction
    /// when the connection has none open (the consumer's case: one round
    /// trip), or part of the caller's (a replay). `partitions` are those
    /// whose positions it moves (none for a replay); `trace_id` goes on the
    /// rows it parks.
    pub(super) async fn run(
        &self,
        connection: &mut sqlx::PgConnection,
        items: &[Classified],
        partitions: Vec<PartitionArgument<'_>>,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let arguments = Arguments::new(items, partitions);
        // fetch_one reads the response up to ReadyForQuery, which PostgreSQL
        // sends only after the implicit transaction committed: a commit that
        // fails is an error here, never a batch reported as applied.
        let applied: Applied = self
            .query(APPLY_BATCH, &arguments, trace_id)
            .fetch_one(connection)
            .await
            .and_then(|row| Applied::from_row(&row))?;
        batch_outcome(items, applied, trace_id)
    }

    /// `sql` (the batch statement, or it explained) with the batch's
    /// arguments bound, as `sql/apply_batch.sql`'s header names them.
    fn query<'q>(
        &'q self,
        sql: &'q str,
        arguments: &'q Arguments<'q>,
        trace_id: Option<&'q str>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        sqlx::query(sql)
            .persistent(self.prepares)
            .bind(self.consumer)
            .bind(&arguments.records)
            .bind(&arguments.lines)
            .bind(&arguments.partitions)
            .bind(trace_id)
            .bind(self.dlq_copies)
    }
}

/// The partitions a statement moves to `positions`: each checked against
/// the position `guard` last read or wrote, and written with its topic's
/// id.
fn partition_arguments<'a>(
    positions: &'a BTreeMap<PartitionKey, i64>,
    guard: &PositionGuard,
) -> Vec<PartitionArgument<'a>> {
    positions
        .iter()
        .zip(guard.expectations(positions.keys()))
        .map(|((key, next), expected)| PartitionArgument {
            topic: &key.0,
            kafka_partition: key.1,
            next_offset: *next,
            expected: expected.position,
            topic_id: expected.topic_id,
        })
        .collect()
}

/// The batch statement's arguments ($2 to $4 of `sql/apply_batch.sql`).
struct Arguments<'a> {
    records: Vec<RecordArgument<'a>>,
    lines: Vec<LineArgument<'a>>,
    partitions: Vec<PartitionArgument<'a>>,
}

impl<'a> Arguments<'a> {
    fn new(items: &'a [Classified], partitions: Vec<PartitionArgument<'a>>) -> Self {
        let (records, lines) = record_arguments(items);
        Arguments {
            records,
            lines,
            partitions,
        }
    }
}

/// The composite type of the database that an argument struct encodes as,
/// and its array type (sqlx's derive of `Type` would also derive a decoder,
/// which borrowed fields cannot have).
macro_rules! composite_type {
    ($argument:ident, $name:literal) => {
        impl sqlx::Type<sqlx::Postgres> for $argument<'_> {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                sqlx::postgres::PgTypeInfo::with_name($name)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $argument<'_> {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                sqlx::postgres::PgTypeInfo::with_name(concat!("_", $name))
            }
        }
    };
}

composite_type!(RecordArgument, "inbox_batch_record");
composite_type!(LineArgument, "inbox_batch_line");
composite_type!(PartitionArgument, "inbox_batch_partition");

/// A record of the batch, in poll order (`inbox_batch_record`).
#[derive(sqlx::Encode)]
struct RecordArgument<'a> {
    topic: &'a str,
    kafka_partition: i32,
    kafka_offset: i64,
    /// `candidate`, `repeat` (its id came earlier in the statement) or
    /// `parked`.
    kind: &'static str,
    event_day: Option<NaiveDate>,
    message_id: Option<Uuid>,
    order_id: Option<&'a str>,
    /// The fingerprint of the record's event (`event::Decoded::fingerprint`).
    fingerprint: Option<i64>,
    /// The hash of the record's bytes, as ledger rows written before
    /// fingerprints hold it.
    byte_hash: Option<i64>,
    /// For a repeat, the ordinal of the first record with its id.
    first_ord: Option<i32>,
    reason: Option<&'static str>,
    error: Option<Cow<'a, str>>,
    /// What a parked row keeps: the statement itself parks a candidate
    /// that turns out to name an unknown SKU or reuse an id.
    payload: Option<&'a [u8]>,
    headers: String,
    record_key: Option<&'a [u8]>,
}

/// An order line of a candidate (`inbox_batch_line`).
#[derive(sqlx::Encode)]
struct LineArgument<'a> {
    /// The ordinal of its record in the statement.
    record_ord: i32,
    sku: &'a str,
    quantity: i32,
    /// Whether another candidate of the batch names the same (order_id,
    /// sku): only those lines are compared with each other in SQL.
    shared: bool,
}

/// A partition the batch moves (`inbox_batch_partition`).
#[derive(sqlx::Encode)]
pub(super) struct PartitionArgument<'a> {
    topic: &'a str,
    kafka_partition: i32,
    next_offset: i64,
    /// The position this inbox last read or wrote (none yet: null).
    expected: Option<i64>,
    /// The topic's id, as the broker said (null: it did not).
    topic_id: Option<Uuid>,
}

/// At most the first `MAX_PAYLOAD_BYTES` of a payload or key: what a
/// parked row keeps.
fn bounded(bytes: &Option<Vec<u8>>) -> Option<&[u8]> {
    bytes
        .as_deref()
        .map(|b| &b[..b.len().min(MAX_PAYLOAD_BYTES)])
}

/// The records and order lines of a batch as the statement takes them.
fn record_arguments(batch: &[Classified]) -> (Vec<RecordArgument<'_>>, Vec<LineArgument<'_>>) {
    let mut records = Vec::with_capacity(batch.len());
    let mut lines = Vec::new();
    let mut first_with_id: HashMap<Uuid, i32> = HashMap::new();
    let mut order_lines: HashMap<(&str, &str), usize> = HashMap::new();
    let mut line_keys: Vec<(&str, &str)> = Vec::new();
    for (ord, item) in (1..).zip(batch) {
        let record = &item.record;
        let mut argument = RecordArgument {
            topic: &record.topic,
            kafka_partition: record.partition,
            kafka_offset: record.offset,
            kind: "parked",
            event_day: None,
            message_id: None,
            order_id: None,
            fingerprint: None,
            byte_hash: None,
            first_ord: None,
            reason: None,
            error: None,
            payload: bounded(&record.payload),
            headers: parked::headers_json(&record.headers),
            record_key: bounded(&record.key),
        };
        match item.verdict() {
            Err(rejection) => {
                argument.message_id = rejection.message_id;
                argument.reason = Some(rejection.reason.as_str());
                argument.error = Some(parked::storable_text(&rejection.detail));
            }
            Ok(order) => {
                // A repeat of an id only earlier in the statement: a record
                // whose id came in an earlier part of a split batch is
                // judged by the ledger, as a candidate.
                let first = first_with_id.get(&order.message_id).copied();
                if first.is_none() {
                    first_with_id.insert(order.message_id, ord);
                    for line in &order.lines {
                        let key = (order.order_id.as_str(), line.sku.as_str());
                        *order_lines.entry(key).or_default() += 1;
                        line_keys.push(key);
                        lines.push(LineArgument {
                            record_ord: ord,
                            sku: &line.sku,
                            quantity: line.quantity,
                            shared: false,
                        });
                    }
                }
                argument.kind = if first.is_none() {
                    "candidate"
                } else {
                    "repeat"
                };
                argument.event_day = Some(order.event_day());
                argument.message_id = Some(order.message_id);
                argument.order_id = Some(&order.order_id);
                argument.fingerprint = Some(order.fingerprint);
                argument.byte_hash = Some(record.payload_hash());
                argument.first_ord = first;
            }
        }
        records.push(argument);
    }
    for (line, key) in lines.iter_mut().zip(&line_keys) {
        line.shared = order_lines[key] > 1;
    }
    (records, lines)
}

/// What the batch statement did: the ordinals of the fresh events (and of
/// the business duplicates among them), the duplicates whose ledger row is
/// the record's own, the order lines reserved and rejected, and every
/// parked record with its reason, error, whether it was parked now and its
/// row; the rest of the valid records are duplicates.
#[derive(sqlx::FromRow)]
struct Applied {
    fresh: Vec<i64>,
    business_duplicates: Vec<i64>,
    same_record_duplicates: Vec<i64>,
    lines_reserved: i64,
    lines_rejected: i64,
    parked_ords: Vec<i64>,
    parked_reasons: Vec<String>,
    parked_errors: Vec<String>,
    parked_newly: Vec<bool>,
    parked_ids: Vec<Option<i64>>,
}

/// The batch's outcome from what the statement did.
fn batch_outcome(
    batch: &[Classified],
    applied: Applied,
    trace_id: Option<&str>,
) -> Result<BatchOutcome, StoreError> {
    let item = |ord: i64| &batch[ord as usize - 1];
    let valid = batch
        .iter()
        .filter(|c| !matches!(c.disposition, Disposition::Parked(_)))
        .count();
    let valid_parked = applied
        .parked_ords
        .iter()
        .filter(|ord| !matches!(item(**ord).disposition, Disposition::Parked(_)))
        .count();
    let mut outcome = BatchOutcome {
        processed: applied.fresh.len() as u64,
        business_duplicates: applied.business_duplicates.len() as u64,
        duplicates: (valid - applied.fresh.len() - valid_parked) as u64,
        lines_reserved: applied.lines_reserved as u64,
        lines_rejected: applied.lines_rejected as u64,
        ..BatchOutcome::default()
    };
    if decisions_logged() {
        outcome.decisions = decisions(batch, &applied);
    }
    let event_time = |ord: i64| item(ord).event().map(|order| order.occurred_at);
    outcome.fresh_event_times = applied.fresh.into_iter().filter_map(event_time).collect();
    outcome.same_record_duplicates = applied
        .same_record_duplicates
        .into_iter()
        .filter_map(event_time)
        .collect();
    for ((((ord, reason), error), newly), id) in applied
        .parked_ords
        .into_iter()
        .zip(applied.parked_reasons)
        .zip(applied.parked_errors)
        .zip(applied.parked_newly)
        .zip(applied.parked_ids)
    {
        let reason = ParkReason::from_code(&reason).ok_or_else(|| StoreError::Unexpected {
            sqlstate: String::new(),
            message: format!("the batch statement parked with an unknown reason {reason:?}"),
        })?;
        let parked = item(ord);
        let mut row = ParkedRow::new(
            &parked.record,
            reason,
            error,
            parked.message_id(),
            parked.order_id(),
        );
        row.trace_id = trace_id.map(str::to_owned);
        row.id = id;
        if newly {
            outcome.newly_parked.push(row);
        } else {
            outcome.parked_before.push(row);
        }
    }
    Ok(outcome)
}

/// Each record's decision, in poll order: fresh (processed, or a business
/// duplicate), parked with its reason, else a duplicate.
fn decisions(batch: &[Classified], applied: &Applied) -> Vec<Decision> {
    let ords = |list: &[i64]| -> std::collections::HashSet<usize> {
        list.iter().map(|ord| *ord as usize).collect()
    };
    let (fresh, business, own) = (
        ords(&applied.fresh),
        ords(&applied.business_duplicates),
        ords(&applied.same_record_duplicates),
    );
    let parked: HashMap<usize, &str> = applied
        .parked_ords
        .iter()
        .map(|ord| *ord as usize)
        .zip(applied.parked_reasons.iter().map(String::as_str))
        .collect();
    (1..)
        .zip(batch)
        .map(|(ord, item)| {
            let outcome = if let Some(reason) = parked.get(&ord) {
                DecisionOutcome::Parked(
                    ParkReason::from_code(reason).unwrap_or(ParkReason::DbRejected),
                )
            } else if business.contains(&ord) {
                DecisionOutcome::BusinessDuplicate
            } else if fresh.contains(&ord) {
                DecisionOutcome::Processed
            } else {
                DecisionOutcome::Duplicate
            };
            Decision {
                outcome,
                message_id: item.message_id(),
                order_id: parked::order_for_log(&item.record, item.order_id()),
                topic: item.record.topic.clone(),
                partition: item.record.partition,
                offset: item.record.offset,
                own_write: own.contains(&ord),
            }
        })
        .collect()
}

/// The record parked `db_rejected` without its payload, key or headers, which
/// the database refused to store (SQLSTATE `refused`).
fn reject_bare(item: &Classified, sqlstate: &str, message: &str, refused: &str) -> Classified {
    let mut bare = reject(item, sqlstate, message);
    bare.record.payload = None;
    bare.record.key = None;
    bare.record.headers.clear();
    if let Disposition::Parked(rejection) = &mut bare.disposition {
        rejection.detail.push_str(&format!(
            "; its payload and headers could not be stored (SQLSTATE {refused})"
        ));
    }
    bare
}

/// The record as parked `db_rejected`, with the database's own words.
fn reject(item: &Classified, sqlstate: &str, message: &str) -> Classified {
    Classified {
        record: item.record.clone(),
        decoded: item.decoded.clone(),
        disposition: Disposition::Parked(event::Rejection {
            reason: ParkReason::DbRejected,
            detail: format!("SQLSTATE {sqlstate}: {message}"),
            message_id: item.message_id(),
        }),
    }
}
