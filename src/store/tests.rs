//! In-process tests of the store against the real PostgreSQL: each test gets
//! a database of its own (`#[sqlx::test]` creates it on the server that
//! `DATABASE_URL` names, `.cargo/config.toml` sets the local one, and drops
//! it after a pass), migrated by the store's own `migrate`. Fast checks of
//! what the black-box tests in `tests/` prove through the binary.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;
use uuid::Uuid;

use super::window_cache::WINDOW_REFRESH;
use super::*;
use crate::batch::PartitionKey;
use crate::event::{OrderLine, OrderPlaced, ParkReason};

impl Inbox {
    /// Classifies `records` and applies them as one batch: what the
    /// pipeline does with a batch of a round.
    async fn apply_records(
        &self,
        records: &[InboundRecord],
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        self.apply(&self.classify(records.to_vec()), trace_id).await
    }
}

const RETENTION: Retention = Retention {
    ledger_days: 14,
    parked_days: 30,
    parked_payload_days: 0,
    reservation_days: 30,
    detach_reservations: false,
};

async fn inbox(pool: PgPool, stock: &[(&str, i64)]) -> Inbox {
    migrate(&pool.clone().into(), RETENTION)
        .await
        .expect("migrate");
    for (sku, on_hand) in stock {
        sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ($1, $2, 0)")
            .bind(sku)
            .bind(on_hand)
            .execute(&pool)
            .await
            .expect("seed stock");
    }
    Inbox::new(pool.into(), "store-tests".into())
}

fn order(order_id: &str, sku: &str, quantity: i32) -> OrderPlaced {
    OrderPlaced {
        message_id: Uuid::new_v4(),
        order_id: order_id.into(),
        occurred_at: Utc::now(),
        lines: vec![OrderLine {
            sku: sku.into(),
            quantity,
        }],
    }
}

/// `count` orders `{prefix}-0`, `{prefix}-1`, ..., each of one line.
fn orders(prefix: &str, count: usize, sku: &str, quantity: i32) -> Vec<OrderPlaced> {
    (0..count)
        .map(|i| order(&format!("{prefix}-{i}"), sku, quantity))
        .collect()
}

/// Records of partition 0 from offset 0, in order.
fn records(events: &[OrderPlaced]) -> Vec<InboundRecord> {
    (0..)
        .zip(events)
        .map(|(offset, event)| InboundRecord {
            topic: "orders".into(),
            partition: 0,
            offset,
            timestamp: None,
            key: Some(event.order_id.clone().into_bytes()),
            payload: Some(event.to_json()),
            headers: vec![],
        })
        .collect()
}

/// The partitions to read again and the database's position of each.
fn positions_of(behind: Behind) -> Vec<(PartitionKey, Option<i64>)> {
    behind
        .positions
        .into_iter()
        .map(|(key, stored)| (key, stored.map(|s| s.next_offset)))
        .collect()
}

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("a number")
}

/// One connection a lane (each keeps its own) and one for the rest: the
/// window, maintenance, the filters.
#[tokio::test]
async fn the_pool_has_a_connection_for_each_lane_and_one_more() {
    for lanes in [1, 4] {
        let connection = Connection {
            url: "postgres://inventory:secret@127.0.0.1:5432/inventory",
            statement_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(1),
            pooler: pooler::Pooler::None,
        };
        let pool = connect_lazy(connection, lanes).expect("a lazy pool");
        assert_eq!(pool.pg().options().get_max_connections(), lanes + 1);
    }
    let wrong = Connection {
        url: "postgres://inventory@127.0.0.1:notaport/inventory",
        statement_timeout: Duration::ZERO,
        lock_timeout: Duration::ZERO,
        pooler: pooler::Pooler::None,
    };
    assert!(matches!(
        connect_lazy(wrong, 1),
        Err(StoreError::Rejected { message, .. }) if message.contains("DATABASE_URL")
    ));
}

/// Parked rows past their retention go with their day's partition, and
/// payloads past theirs are cleared, 10,000 a step until a step finds
/// fewer; the report counts both.
#[sqlx::test(migrations = false)]
async fn maintenance_prunes_parked_rows_in_steps_and_counts_them(pool: PgPool) {
    let db = pool.clone().into();
    let retention = Retention {
        parked_payload_days: 1,
        ..RETENTION
    };
    migrate(&db, retention).await.expect("migrate");
    let old = Utc::now().date_naive() - chrono::Duration::days(40);
    sqlx::query(&format!(
        "CREATE TABLE inbox_parked_p{} PARTITION OF inbox_parked
         FOR VALUES FROM ('{old}') TO ('{}')",
        old.format("%Y%m%d"),
        old + chrono::Duration::days(1)
    ))
    .execute(&pool)
    .await
    .expect("a day of parked rows 40 days ago");
    // 3 rows of that day, and 25,000 of today parked two days ago (by
    // their clock), each with its payload.
    sqlx::query(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   reason, error, payload, parked_at)
         SELECT CASE WHEN n <= 3 THEN $1 ELSE CURRENT_DATE END, 'c', 'orders', 0, n,
                'invalid_json', 'e', '\\x00', now() - interval '2 days'
         FROM generate_series(1, 25003) AS n",
    )
    .bind(old)
    .execute(&pool)
    .await
    .expect("parked rows");
    let report = maintain(&db, MaintenanceTrigger::Command)
        .await
        .expect("maintain");
    assert!(report.locked);
    assert_eq!(
        (report.parked_deleted, report.payloads_cleared),
        (3, 25_000)
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM inbox_parked WHERE payload IS NOT NULL"
        )
        .await,
        0
    );
    assert_eq!(
        scalar(&pool, "SELECT count(*) FROM inbox_parked").await,
        25_000
    );
    let again = maintain(&db, MaintenanceTrigger::Command)
        .await
        .expect("maintain");
    assert_eq!((again.parked_deleted, again.payloads_cleared), (0, 0));
}

/// Each maintenance run is recorded with what started it and what it did,
/// or the error that stopped it; the record keeps the last
/// MAINTENANCE_RUNS_KEPT runs, and the overview's read finds the last run
/// that did the work behind later failures.
#[sqlx::test(migrations = false)]
async fn maintenance_runs_are_recorded_with_their_result_and_bounded(pool: PgPool) {
    let db: DbPool = pool.clone().into();
    migrate(&db, RETENTION).await.expect("migrate");
    let report = maintain(&db, MaintenanceTrigger::Hourly)
        .await
        .expect("maintain");
    let runs = maintenance_runs(&db, 10).await.expect("runs");
    assert_eq!(
        runs.iter()
            .map(|r| r.started_by.as_str())
            .collect::<Vec<_>>(),
        ["run: hourly", "migrate"],
        "newest first"
    );
    let last = &runs[0];
    assert!(last.did_the_work(), "{last:?}");
    assert!(last.finished_at.expect("finished") >= last.started_at);
    assert_eq!(
        (
            last.created,
            last.dropped,
            last.parked_deleted,
            last.payloads_cleared
        ),
        (
            Some(report.created),
            Some(report.dropped),
            Some(report.parked_deleted),
            Some(report.payloads_cleared)
        )
    );
    assert!(
        runs[1].created.expect("migrate's run created the window") > 0,
        "{:?}",
        runs[1]
    );

    // A step that fails: the run is recorded with its error, no counts.
    sqlx::query("ALTER FUNCTION inbox_drop_expired() RENAME TO inbox_drop_expired_away")
        .execute(&pool)
        .await
        .expect("rename");
    let failed = maintain(&db, MaintenanceTrigger::Command).await;
    assert!(failed.is_err());
    sqlx::query("ALTER FUNCTION inbox_drop_expired_away() RENAME TO inbox_drop_expired")
        .execute(&pool)
        .await
        .expect("rename back");
    let runs = maintenance_runs(&db, 1).await.expect("runs");
    assert_eq!(
        runs.len(),
        2,
        "the failed run and the last good one: {runs:?}"
    );
    assert_eq!(runs[0].started_by, "maintain");
    assert!(
        runs[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("inbox_drop_expired")),
        "{:?}",
        runs[0]
    );
    assert_eq!((runs[0].locked, runs[0].created), (None, None));
    assert!(runs[0].finished_at.is_some() && !runs[0].did_the_work());
    assert_eq!(runs[1].started_by, "run: hourly");

    // Months of runs: the table keeps the last MAINTENANCE_RUNS_KEPT.
    sqlx::query(
        "INSERT INTO inbox_maintenance_run (started_by, finished_at, locked)
         SELECT 'run: hourly', now(), false FROM generate_series(1, 500)",
    )
    .execute(&pool)
    .await
    .expect("old runs");
    maintain(&db, MaintenanceTrigger::StartUp)
        .await
        .expect("maintain");
    let (rows, newest): (i64, String) = sqlx::query_as(
        "SELECT count(*), (SELECT started_by FROM inbox_maintenance_run ORDER BY id DESC LIMIT 1)
         FROM inbox_maintenance_run",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(rows, i64::from(MAINTENANCE_RUNS_KEPT));
    assert_eq!(newest, "run: start-up");

    // The record is for people: a run that cannot be recorded is done all
    // the same.
    sqlx::query("ALTER FUNCTION inbox_maintenance_begun(text, integer) RENAME TO begun_away")
        .execute(&pool)
        .await
        .expect("rename");
    let unrecorded = maintain(&db, MaintenanceTrigger::Hourly)
        .await
        .expect("maintained, unrecorded");
    assert!(unrecorded.locked);
    let newest: String =
        sqlx::query_scalar("SELECT started_by FROM inbox_maintenance_run ORDER BY id DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .expect("newest");
    assert_eq!(newest, "run: start-up", "no row for the unrecorded run");
}

/// Every replay of a parked record is kept in its row's history, with its
/// outcome and who replayed it, the last REPLAYS_KEPT of them; the last
/// outcome stays where `parked list` reads it.
#[sqlx::test(migrations = false)]
async fn every_replay_of_a_parked_record_is_kept_up_to_a_bound(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let db: DbPool = pool.clone().into();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   reason, error, payload)
         VALUES (CURRENT_DATE, 'store-tests', 'orders', 0, 7, 'malformed_json', 'e', 'junk')
         RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("a parked row");
    let never = parked_record(&db, "store-tests", id)
        .await
        .expect("read")
        .expect("the row");
    assert!(never.replays.is_empty());
    let times = REPLAYS_KEPT as usize + 5;
    for n in 0..times {
        let outcome = replay(&db, "store-tests", id, &format!("test {n}"))
            .await
            .expect("replay");
        assert!(
            matches!(
                outcome,
                ReplayOutcome::StillParked(ParkReason::MalformedJson, _)
            ),
            "{outcome}"
        );
    }
    let record = parked_record(&db, "store-tests", id)
        .await
        .expect("read")
        .expect("the row");
    assert_eq!(record.replays.len(), REPLAYS_KEPT as usize, "bounded");
    let by: Vec<&str> = record.replays.iter().map(|r| r.by.as_str()).collect();
    assert_eq!(by.first(), Some(&"test 5"), "the oldest went: {by:?}");
    assert_eq!(by.last(), Some(&format!("test {}", times - 1).as_str()));
    assert!(record
        .replays
        .windows(2)
        .all(|pair| pair[0].at <= pair[1].at));
    assert!(
        record.replays[0]
            .outcome
            .starts_with("still parked: malformed_json"),
        "{:?}",
        record.replays[0]
    );
    assert_eq!(
        record.entry.replay_outcome.as_deref(),
        Some(record.replays[REPLAYS_KEPT as usize - 1].outcome.as_str())
    );
    assert_eq!(record.entry.replayed_at, None, "still eligible");
}

/// Compaction rebuilds each index of the closed days once, and its report
/// adds up what `inbox_compacted` records of each.
#[sqlx::test(migrations = false)]
async fn compaction_reports_the_bytes_of_every_index_it_rebuilt(pool: PgPool) {
    migrated_with_codes(&pool).await;
    ledger_rows(&pool, 3, 5_000).await;
    ledger_rows(&pool, 4, 5_000).await;
    let db = pool.clone().into();
    let report = compact(&db).await.expect("compact");
    assert!(report.owner);
    assert_eq!(report.failed, Vec::<String>::new());
    let (rebuilt, before, after): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), sum(bytes_before)::bigint, sum(bytes_after)::bigint
         FROM inbox_compacted",
    )
    .fetch_one(&pool)
    .await
    .expect("what was recorded");
    assert_eq!(
        (
            report.rebuilt as i64,
            report.bytes_before,
            report.bytes_after
        ),
        (rebuilt, before, after)
    );
    assert!(rebuilt >= 2 && after < before, "{report:?}");
    assert_eq!(compact(&db).await.expect("again").rebuilt, 0, "once");
}

/// `migrate` holds a session's advisory lock across transactions: through
/// a transaction pooler it is refused before it connects.
#[tokio::test]
async fn migrate_is_refused_through_a_transaction_pooler() {
    let connection = Connection {
        url: "postgres://inventory:secret@127.0.0.1:1/inventory",
        statement_timeout: Duration::ZERO,
        lock_timeout: Duration::ZERO,
        pooler: pooler::Pooler::Transaction,
    };
    let pool = connect_lazy(connection, 1).expect("a lazy pool");
    let refused = migrate(&pool, RETENTION).await;
    assert!(
        matches!(&refused, Err(StoreError::Schema(text)) if text.contains("transaction pooler")),
        "{refused:?}"
    );
}

#[test]
fn compaction_lifts_the_statement_timeout_unless_behind_a_transaction_pooler() {
    use pooler::Pooler;
    assert!(schema::lifts_statement_timeout(Pooler::None));
    assert!(schema::lifts_statement_timeout(Pooler::Session));
    assert!(!schema::lifts_statement_timeout(Pooler::Transaction));
}

/// What the schema check says of a database: `Ok`, or the error's text.
async fn schema_check(pool: &PgPool) -> Result<(), String> {
    check_schema(&pool.clone().into())
        .await
        .map_err(|error| match error {
            StoreError::Schema(text) => text,
            other => panic!("not a schema error: {other:?}"),
        })
}

#[sqlx::test(migrations = false)]
async fn the_schema_check_says_what_to_do_of_each_version(pool: PgPool) {
    let none = schema_check(&pool).await.expect_err("no schema");
    assert!(none.contains("has no inbox schema"), "{none}");
    inbox(pool.clone(), &[]).await;
    assert_eq!(schema_check(&pool).await, Ok(()));
    let newest: i64 = scalar(&pool, "SELECT max(version) FROM _sqlx_migrations").await;
    // Its last migration not applied: older than the binary.
    sqlx::query("UPDATE _sqlx_migrations SET success = false WHERE version = $1")
        .bind(newest)
        .execute(&pool)
        .await
        .expect("the last one undone");
    let older = schema_check(&pool).await.expect_err("older");
    assert!(older.contains("is older than this binary"), "{older}");
    assert!(older.contains(&format!("needs {newest}")), "{older}");
    // One migration more than the binary knows: newer.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         SELECT version + 1, 'from a newer release', true, checksum, 0
         FROM _sqlx_migrations WHERE version = $1",
    )
    .bind(newest)
    .execute(&pool)
    .await
    .expect("a newer one");
    let newer = schema_check(&pool).await.expect_err("newer");
    assert!(newer.contains("is newer than this binary"), "{newer}");
    assert!(newer.contains(&format!("knows up to {newest}")), "{newer}");
    // A role that may not read the versions (a schema from before the
    // grant): told to migrate.
    sqlx::query("REVOKE SELECT ON _sqlx_migrations FROM CURRENT_USER")
        .execute(&pool)
        .await
        .expect("revoke");
    let unreadable = schema_check(&pool).await.expect_err("unreadable");
    assert!(
        unreadable.contains("cannot read the schema version"),
        "{unreadable}"
    );
    // Any other refusal is the database's, as it said it.
    sqlx::raw_sql(
        "GRANT SELECT ON _sqlx_migrations TO CURRENT_USER;
         ALTER TABLE _sqlx_migrations RENAME COLUMN success TO done",
    )
    .execute(&pool)
    .await
    .expect("a version table of another shape");
    let other = check_schema(&pool.clone().into()).await;
    assert!(
        matches!(&other, Err(StoreError::Unexpected { sqlstate, .. }) if sqlstate == "42703"),
        "{other:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_retention_reads_back_as_migrate_wrote_it(pool: PgPool) {
    let db = pool.clone().into();
    for detach_reservations in [true, false] {
        let written = Retention {
            ledger_days: 9,
            parked_days: 20,
            parked_payload_days: 3,
            reservation_days: 11,
            detach_reservations,
        };
        migrate(&db, written).await.expect("migrate");
        assert_eq!(retention(&db).await.expect("read"), written);
    }
}

#[sqlx::test(migrations = false)]
async fn a_batch_is_applied_once_and_its_redelivery_changes_nothing(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 10, "SKU-A", 2);
    let batch = records(&events);
    let first = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!((first.processed, first.duplicates), (10, 0));
    let again = inbox
        .apply_records(&batch, None)
        .await
        .expect("redelivered");
    assert_eq!((again.processed, again.duplicates), (0, 10));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        20
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT next_offset FROM inbox_position WHERE kafka_partition = 0"
        )
        .await,
        10
    );
}

#[sqlx::test(migrations = false)]
async fn bisection_parks_only_the_refused_record(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    sqlx::query(
        "ALTER TABLE order_reservation ADD CONSTRAINT no_blocked CHECK (order_id <> 'BLOCKED')",
    )
    .execute(&pool)
    .await
    .expect("a constraint the record breaks");
    let mut events = orders("O", 7, "SKU-A", 1);
    events.insert(3, order("BLOCKED", "SKU-A", 1));
    let outcome = inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    assert_eq!(outcome.processed, 7);
    let parked: Vec<_> = outcome
        .newly_parked
        .iter()
        .map(|row| (row.reason, row.offset))
        .collect();
    assert_eq!(parked, [(ParkReason::DbRejected, 3)]);
    assert!(outcome.newly_parked[0].error.contains("23514"));
    // The refused record is an event: its row names it, for the log line,
    // the DLQ copy and the table.
    let blocked = &events[3];
    assert_eq!(
        (
            outcome.newly_parked[0].message_id,
            outcome.newly_parked[0].order_id.as_deref()
        ),
        (Some(blocked.message_id), Some("BLOCKED"))
    );
    let stored: Option<uuid::Uuid> =
        sqlx::query_scalar("SELECT message_id FROM inbox_parked WHERE reason = 'db_rejected'")
            .fetch_one(&pool)
            .await
            .expect("the parked row");
    assert_eq!(stored, Some(blocked.message_id));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        7
    );
}

#[sqlx::test(migrations = false)]
async fn an_id_reused_with_another_payload_is_a_conflict_not_a_duplicate(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 1);
    let mut reused = order("O-1", "SKU-A", 7);
    reused.message_id = original.message_id;
    let reused_id = reused.message_id;
    inbox
        .apply_records(&records(&[original]), None)
        .await
        .expect("applied");
    let mut batch = records(&[reused]);
    batch[0].offset = 1;
    let outcome = inbox
        .apply_records(&batch, Some("4bf92f3577b34da6a3ce929d0e0e4736"))
        .await
        .expect("applied");
    assert_eq!((outcome.processed, outcome.duplicates), (0, 0));
    assert_eq!(outcome.newly_parked.len(), 1);
    let row = &outcome.newly_parked[0];
    assert_eq!(row.reason, ParkReason::EventIdConflict);
    assert_eq!(
        (row.message_id, row.order_id.as_deref()),
        (Some(reused_id), Some("O-1"))
    );
    assert_eq!(
        row.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1,
        "the original's 1, never the 7"
    );
}

#[sqlx::test(migrations = false)]
async fn a_database_gone_back_is_refused_before_anything_is_written(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    let batch = records(&events);
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    // As after a restore: the position this inbox wrote is gone.
    sqlx::query("DELETE FROM inbox_position")
        .execute(&pool)
        .await
        .expect("the database goes back");
    let refused = inbox.apply_records(&batch[2..], None).await;
    match refused {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(("orders".into(), 0), None)]);
        }
        other => panic!("expected PositionBehind, got {other:?}"),
    }
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2,
        "nothing of the refused batch"
    );
}

#[sqlx::test(migrations = false)]
async fn positions_read_at_an_assignment_are_guarded_and_carry_the_topics_id(pool: PgPool) {
    let first = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    let batch = records(&events);
    first
        .apply_records(&batch[..1], None)
        .await
        .expect("applied");
    // Another member (or this one restarted) is assigned the partition and
    // reads the database's position of it, with Kafka's id of the topic.
    let key: PartitionKey = ("orders".into(), 0);
    let topic = Uuid::new_v4();
    let member = Inbox::new(pool.clone().into(), "store-tests".into());
    member.positions().expect(
        std::slice::from_ref(&key),
        &BTreeMap::from([(key.clone(), 1)]),
        &BTreeMap::from([("orders".to_string(), topic)]),
    );
    assert_eq!(member.positions().topic_id("orders"), Some(topic));
    assert_eq!(member.positions().topic_id("payments"), None);
    member
        .apply_records(&batch[1..2], None)
        .await
        .expect("applied");
    assert_eq!(
        sqlx::query_scalar::<_, Option<Uuid>>("SELECT topic_id FROM inbox_position")
            .fetch_one(&pool)
            .await
            .expect("the position"),
        Some(topic),
        "the position carries the topic's id from now on"
    );
    // Read again for the same topic, it is the member's own; for a topic
    // of the same name created again since, it is none.
    let keys = std::slice::from_ref(&key);
    assert_eq!(
        member.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
    let recreated = Inbox::new(pool.clone().into(), "store-tests".into());
    recreated.positions().expect(
        keys,
        &BTreeMap::from([(key.clone(), 2)]),
        &BTreeMap::from([("orders".to_string(), Uuid::new_v4())]),
    );
    assert_eq!(
        positions_of(recreated.positions().gone_back(keys).await.expect("asked")),
        [(key.clone(), None)]
    );
    // The database goes back to before what it had when the member read it.
    sqlx::query("UPDATE inbox_position SET next_offset = 1")
        .execute(&pool)
        .await
        .expect("the database goes back");
    let fresh = Inbox::new(pool.clone().into(), "store-tests".into());
    fresh.positions().expect(
        std::slice::from_ref(&key),
        &BTreeMap::from([(key.clone(), 2)]),
        &BTreeMap::new(),
    );
    match fresh.apply_records(&batch[2..], None).await {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(key, Some(1))])
        }
        other => panic!("expected PositionBehind, got {other:?}"),
    }
}

#[sqlx::test(migrations = false)]
async fn only_a_position_behind_the_one_written_is_gone_back(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    let key: PartitionKey = ("orders".into(), 0);
    let keys = std::slice::from_ref(&key);
    let at = |offset: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query("UPDATE inbox_position SET next_offset = $1")
                .bind(offset)
                .execute(&pool)
                .await
                .expect("position moved");
        }
    };
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
    at(6).await;
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default(),
        "ahead is not behind"
    );
    at(2).await;
    let behind = inbox.positions().gone_back(keys).await.expect("asked");
    assert_eq!(positions_of(behind), [(key.clone(), Some(2))]);
    // Expected at the database's position from now on.
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
}

#[sqlx::test(migrations = false)]
async fn an_operator_sets_a_position_back_and_the_inbox_sees_who_moved_it(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    let listed = |topic: Option<&'static str>| {
        let pool = inbox.pool().clone();
        async move {
            positions::list(&pool, "store-tests", topic)
                .await
                .expect("listed")
                .into_iter()
                .map(|p| (p.topic, p.partition, p.next_offset))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(None).await, [("orders".to_string(), 0, 4)]);
    assert_eq!(listed(Some("payments")).await, []);
    let set = |partition, offset| {
        let pool = inbox.pool().clone();
        async move {
            positions::set(&pool, "store-tests", "orders", partition, offset)
                .await
                .expect("set")
        }
    };
    assert_eq!(set(0, 1).await, Some(4), "the position before");
    assert_eq!(set(0, 1).await, Some(1));
    assert_eq!(set(7, 3).await, None, "none before");
    assert_eq!(
        listed(Some("orders")).await,
        [("orders".to_string(), 0, 1), ("orders".to_string(), 7, 3)]
    );
    let key: PartitionKey = ("orders".into(), 0);
    let behind = inbox
        .positions()
        .gone_back(std::slice::from_ref(&key))
        .await
        .expect("asked");
    assert!(behind.by_operator(&key));
    assert_eq!(positions_of(behind), [(key.clone(), Some(1))]);
}

/// Holds the stock row of `sku` in a transaction of its own while `work`
/// runs, until `waiters` sessions wait behind it; then runs `during` (what
/// it commits lands while they are in flight) and lets them go on.
async fn while_batches_wait<T>(
    pool: &PgPool,
    sku: &str,
    waiters: i64,
    work: impl std::future::Future<Output = T>,
    during: impl std::future::Future<Output = ()>,
) -> T {
    let mut hold = pool.begin().await.expect("begin");
    sqlx::query("SELECT FROM inventory_stock WHERE sku = $1 FOR UPDATE")
        .bind(sku)
        .execute(&mut *hold)
        .await
        .expect("hold the stock row");
    let release = async {
        until_waiting(pool, waiters).await;
        during.await;
        hold.commit().await.expect("release the stock row");
    };
    let (result, ()) = tokio::join!(work, release);
    result
}

/// One batch waits behind `sku`'s held stock row while `during` commits.
async fn while_a_batch_waits<T>(
    pool: &PgPool,
    sku: &str,
    batch: impl std::future::Future<Output = T>,
    during: impl std::future::Future<Output = ()>,
) -> T {
    while_batches_wait(pool, sku, 1, batch, during).await
}

/// The position row of partition 0: next offset, set by an operator, the
/// highest position a batch wrote.
async fn position_row(pool: &PgPool) -> (i64, bool, Option<i64>) {
    sqlx::query_as(
        "SELECT next_offset, moved_by_operator, applied_through FROM inbox_position
         WHERE topic = 'orders' AND kafka_partition = 0",
    )
    .fetch_one(pool)
    .await
    .expect("the position")
}

/// An operator rewinds a partition while a batch of it waits on a stock
/// row's lock, its snapshot taken before the set: the batch must not write
/// its position over the operator's (seen: `greatest(0, 4)` = 4, the
/// rewind undone, `moved_by_operator` cleared). It is refused whole, and
/// the inbox reads the partition from the operator's position.
#[sqlx::test(migrations = false)]
async fn a_rewind_while_a_batch_is_in_flight_is_not_written_over(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let batch = records(&orders("O", 4, "SKU-A", 1));
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    let set = async {
        let before = positions::set(inbox.pool(), "store-tests", "orders", 0, 0)
            .await
            .expect("set");
        assert_eq!(before, Some(2));
    };
    let refused =
        while_a_batch_waits(&pool, "SKU-A", inbox.apply_records(&batch[2..], None), set).await;
    let key: PartitionKey = ("orders".into(), 0);
    match refused {
        Err(StoreError::PositionBehind(behind)) => {
            assert!(behind.by_operator(&key), "{behind:?}");
            assert_eq!(positions_of(behind), [(key.clone(), Some(0))]);
        }
        other => panic!("expected the batch refused, got {other:?}"),
    }
    assert_eq!(
        position_row(&pool).await,
        (0, true, Some(2)),
        "the rewind stands"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2,
        "nothing of the refused batch"
    );
    // Read again from 0: the first two are duplicates, the rest applied.
    let again = inbox.apply_records(&batch, None).await.expect("read again");
    assert_eq!((again.processed, again.duplicates), (2, 2));
    assert_eq!(position_row(&pool).await, (4, false, Some(4)));
}

/// An operator skips a partition forward (past records the consumer holds
/// but has not applied, e.g. while the poison breaker holds): the next
/// batch of the records before the skip is refused, not applied, and the
/// inbox reads the partition from the operator's position; a skip while a
/// batch waits on a lock is refused alike.
#[sqlx::test(migrations = false)]
async fn a_skip_forward_is_honoured_by_the_next_batch_and_one_in_flight(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 12, "SKU-A", 1);
    let batch = records(&events);
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    positions::set(inbox.pool(), "store-tests", "orders", 0, 6)
        .await
        .expect("set");
    let key: PartitionKey = ("orders".into(), 0);
    match inbox.apply_records(&batch[2..4], None).await {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(key.clone(), Some(6))]);
        }
        other => panic!("expected the batch refused, got {other:?}"),
    }
    assert_eq!(position_row(&pool).await, (6, true, Some(2)));
    inbox
        .apply_records(&batch[6..8], None)
        .await
        .expect("from the skip");
    assert_eq!(position_row(&pool).await, (8, false, Some(8)));
    // Skipped while the next batch waits for its stock row.
    let set = async {
        positions::set(inbox.pool(), "store-tests", "orders", 0, 10)
            .await
            .expect("set");
    };
    let refused = while_a_batch_waits(
        &pool,
        "SKU-A",
        inbox.apply_records(&batch[8..10], None),
        set,
    )
    .await;
    assert!(
        matches!(&refused, Err(StoreError::PositionBehind(b)) if b.by_operator(&key)),
        "{refused:?}"
    );
    assert_eq!(position_row(&pool).await, (10, true, Some(8)));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        4,
        "the records skipped never applied"
    );
}

/// What a position lacks below a partition's log start: a database that
/// went back lacks all of it; a position an operator set back lacks only
/// what no batch applied.
#[test]
fn only_records_never_applied_are_lacking_below_the_log_start() {
    let stored = |next_offset, applied_through| positions::Stored {
        next_offset,
        by_operator: false,
        applied_through,
    };
    assert_eq!(stored(10, Some(10)).never_applied_before(40), 30);
    assert_eq!(stored(10, None).never_applied_before(40), 30);
    assert_eq!(stored(2, Some(50)).never_applied_before(40), 0);
    assert_eq!(stored(2, Some(50)).never_applied_before(60), 10);
    assert_eq!(stored(45, Some(50)).never_applied_before(40), 0);
}

#[sqlx::test(migrations = false)]
async fn a_parked_record_replayed_is_applied_once_or_stays_parked_with_its_reason(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 10)]).await;
    let unknown = order("R-1", "SKU-R", 1);
    let later = order("R-2", "SKU-Q", 1);
    let mut batch = records(&[unknown, later.clone()]);
    batch.push(malformed(2));
    let parked = inbox.apply_records(&batch, None).await.expect("parked");
    let ids: Vec<i64> = parked
        .newly_parked
        .iter()
        .map(|row| row.id.expect("an id"))
        .collect();
    let [unknown_id, later_id, malformed_id] = ids[..] else {
        panic!("three parked: {parked:?}")
    };
    assert_eq!(
        replay_candidates(inbox.pool(), inbox.consumer(), ParkReason::UnknownSku, None)
            .await
            .expect("candidates"),
        [unknown_id, later_id]
    );
    let listed = list_parked(inbox.pool(), inbox.consumer(), &ParkedFilter::default(), 10)
        .await
        .expect("listed");
    assert_eq!(
        listed.iter().map(|entry| entry.id).collect::<Vec<_>>(),
        [unknown_id, later_id, malformed_id]
    );
    let still = |outcome: ReplayOutcome| match outcome {
        ReplayOutcome::StillParked(reason, _) => reason,
        other => panic!("expected StillParked, got {other:?}"),
    };
    assert_eq!(
        still(
            replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
                .await
                .expect("replayed")
        ),
        ParkReason::UnknownSku
    );
    assert_eq!(
        still(
            replay(inbox.pool(), inbox.consumer(), malformed_id, "store tests")
                .await
                .expect("replayed")
        ),
        ParkReason::MalformedJson
    );
    sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ('SKU-R', 5, 0), ('SKU-Q', 5, 0)")
        .execute(&pool)
        .await
        .expect("the SKUs are stocked");
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::Applied
    );
    assert!(matches!(
        replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::AlreadyReplayed(_)
    ));
    assert_eq!(
        replay_candidates(inbox.pool(), inbox.consumer(), ParkReason::UnknownSku, None)
            .await
            .expect("candidates"),
        [later_id],
        "a record applied by a replay is no longer a candidate"
    );
    // The other event came again at a later position and was applied.
    let mut again = records(&[later]);
    again[0].offset = 3;
    inbox.apply_records(&again, None).await.expect("applied");
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), later_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::Duplicate
    );
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), 424_242, "store tests")
            .await
            .expect("asked"),
        ReplayOutcome::NotFound
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT sum(reserved)::bigint FROM inventory_stock WHERE sku IN ('SKU-R', 'SKU-Q')"
        )
        .await,
        2,
        "each event reserved once"
    );
    // What each replay came to is kept on its row, as the CLI prints it.
    let outcomes: Vec<_> =
        list_parked(inbox.pool(), inbox.consumer(), &ParkedFilter::default(), 10)
            .await
            .expect("listed")
            .into_iter()
            .map(|entry| (entry.id, entry.replay_outcome))
            .collect();
    assert_eq!(
        outcomes[..2],
        [
            (unknown_id, Some("applied".to_string())),
            (later_id, Some("duplicate (already applied)".to_string()))
        ]
    );
    assert!(
        outcomes[2]
            .1
            .as_deref()
            .is_some_and(|text| text.starts_with("still parked: malformed_json: ")),
        "{outcomes:?}"
    );
}

/// A replay that parks the record again says why in the statement's own
/// words: an id conflict stays an id conflict (seen: reported as an
/// unknown SKU), an unknown SKU names the SKU.
#[sqlx::test(migrations = false)]
async fn a_replay_parked_again_reports_the_statements_own_reason(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("C-1", "SKU-A", 1);
    let unknown = order("C-2", "SKU-Z", 1);
    let batch = records(&[original.clone(), conflict_event(&original), unknown]);
    let parked = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        parked_of(&parked),
        [
            (ParkReason::EventIdConflict, 1),
            (ParkReason::UnknownSku, 2)
        ]
    );
    let id = |n: usize| parked.newly_parked[n].id.expect("an id");
    match replay(inbox.pool(), inbox.consumer(), id(0), "store tests")
        .await
        .expect("replayed")
    {
        ReplayOutcome::StillParked(ParkReason::EventIdConflict, detail) => assert!(
            detail.contains(&original.message_id.to_string()),
            "{detail}"
        ),
        other => panic!("expected still parked as an id conflict, got {other:?}"),
    }
    match replay(inbox.pool(), inbox.consumer(), id(1), "store tests")
        .await
        .expect("replayed")
    {
        ReplayOutcome::StillParked(ParkReason::UnknownSku, detail) => {
            assert!(detail.contains("SKU-Z"), "{detail}")
        }
        other => panic!("expected still parked for its SKU, got {other:?}"),
    }
    let stored: String =
        sqlx::query_scalar("SELECT replay_outcome FROM inbox_parked WHERE id = $1")
            .bind(id(0))
            .fetch_one(&pool)
            .await
            .expect("the outcome kept");
    assert!(
        stored.starts_with("still parked: event_id_conflict: "),
        "{stored}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_window_is_read_again_once_a_minute_old(pool: PgPool) {
    let inbox = inbox(pool, &[]).await;
    let before = Instant::now();
    assert_eq!(inbox.window.as_of(before), None, "not read yet");
    let read = inbox.refresh_window().await.expect("window");
    let after = Instant::now();
    assert_eq!(inbox.window.as_of(after), Some(read.clone()));
    // Read between `before` and `after`: a minute after `before` it is
    // a minute old at most, a minute after `after` more than a minute.
    assert_eq!(inbox.window.as_of(before + WINDOW_REFRESH), Some(read));
    assert_eq!(
        inbox
            .window
            .as_of(after + WINDOW_REFRESH + Duration::from_millis(1)),
        None,
        "read again after midnight at the latest a minute on"
    );
}

#[sqlx::test(migrations = false)]
async fn the_round_trip_is_timed_when_the_window_is_read(pool: PgPool) {
    let inbox = inbox(pool, &[]).await;
    assert_eq!(inbox.round_trip(), None, "not timed before");
    inbox.refresh_window().await.expect("window");
    let timed = inbox.round_trip().expect("timed");
    assert!(
        timed > Duration::ZERO && timed < Duration::from_secs(5),
        "{timed:?}"
    );
}

/// An order line placed at `occurred_at`.
fn order_at(
    order_id: &str,
    sku: &str,
    quantity: i32,
    occurred_at: chrono::DateTime<Utc>,
) -> OrderPlaced {
    OrderPlaced {
        occurred_at,
        ..order(order_id, sku, quantity)
    }
}

/// Records of `partition`, from offset `first`, in order.
fn records_at(partition: i32, first: i64, events: &[OrderPlaced]) -> Vec<InboundRecord> {
    records(events)
        .into_iter()
        .map(|mut record| {
            record.partition = partition;
            record.offset += first;
            record
        })
        .collect()
}

fn parked_of(outcome: &BatchOutcome) -> Vec<(ParkReason, i64)> {
    outcome
        .newly_parked
        .iter()
        .map(|row| (row.reason, row.offset))
        .collect()
}

/// Until `sessions` of this database wait for a lock. Bounded: a batch
/// that never waits (it failed at once) fails the test rather than hang it.
async fn until_waiting(pool: &PgPool, sessions: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while waiting_for_locks(pool).await < sessions {
        assert!(
            std::time::Instant::now() < deadline,
            "{sessions} session(s) never waited for a lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Sessions of this database waiting for a lock.
async fn waiting_for_locks(pool: &PgPool) -> i64 {
    scalar(
        pool,
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await
}

/// Runs two batches so that each takes its snapshot before either commits:
/// both wait behind a held stock row, then go one after the other.
async fn concurrently(
    pool: &PgPool,
    sku: &str,
    first: (&Inbox, Vec<InboundRecord>),
    second: (&Inbox, Vec<InboundRecord>),
) -> (BatchOutcome, BatchOutcome) {
    let (first_inbox, first_batch) = first;
    let (second_inbox, second_batch) = second;
    let both = async {
        tokio::join!(
            first_inbox.apply_records(&first_batch, None),
            second_inbox.apply_records(&second_batch, None)
        )
    };
    let (one, two) = while_batches_wait(pool, sku, 2, both, async {}).await;
    (one.expect("first applied"), two.expect("second applied"))
}

#[sqlx::test(migrations = false)]
async fn an_id_reused_with_another_days_event_time_is_a_conflict(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 3);
    let mut reused = order_at("O-2", "SKU-A", 3, Utc::now() - chrono::Duration::days(1));
    reused.message_id = original.message_id;
    inbox
        .apply_records(&records(std::slice::from_ref(&original)), None)
        .await
        .expect("applied");
    let later = inbox
        .apply_records(&records_at(0, 1, &[reused.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&later), [(ParkReason::EventIdConflict, 1)]);
    // The same two records in one batch, on a fresh consumer: the same.
    let other = Inbox::new(pool.clone().into(), "store-tests-2".into());
    let together = other
        .apply_records(&records_at(3, 0, &[original, reused]), None)
        .await
        .expect("applied");
    assert_eq!(together.processed, 1);
    assert_eq!(parked_of(&together), [(ParkReason::EventIdConflict, 1)]);
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM inbox_ledger WHERE consumer = 'store-tests'"
        )
        .await,
        1,
        "one ledger row for one id"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3,
        "O-1's 3 units, never O-2's"
    );
}

#[sqlx::test(migrations = false)]
async fn a_repeat_of_a_parked_records_id_is_judged_as_in_a_later_batch(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    // The same parked record twice: parked twice, at each position.
    let unknown = order("O-1", "SKU-NOPE", 1);
    let again = inbox
        .apply_records(&records(&[unknown.clone(), unknown.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(
        parked_of(&again),
        [(ParkReason::UnknownSku, 0), (ParkReason::UnknownSku, 1)]
    );
    // Its id with a valid payload is applied, as it would be in a batch of
    // its own (the parked record never reached the ledger), and then the
    // parked record again is a conflict with it.
    let mut valid = order("O-2", "SKU-A", 2);
    valid.message_id = unknown.message_id;
    let batch = records_at(0, 2, &[unknown.clone(), valid, unknown]);
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        parked_of(&outcome),
        [
            (ParkReason::UnknownSku, 2),
            (ParkReason::EventIdConflict, 4)
        ]
    );
    assert_eq!(outcome.processed, 1, "the valid payload is applied");
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2
    );
    assert_eq!(
        scalar(&pool, "SELECT next_offset FROM inbox_position").await,
        5
    );
}

#[sqlx::test(migrations = false)]
async fn a_fresh_event_after_a_parked_conflict_on_its_order_line_is_processed(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-T", 100)]).await;
    let first = order("P-1", "SKU-T", 1);
    inbox
        .apply_records(&records(std::slice::from_ref(&first)), None)
        .await
        .expect("applied");
    let mut reused = order("P-2", "SKU-T", 2);
    reused.message_id = first.message_id;
    let fresh = order("P-2", "SKU-T", 2);
    let outcome = inbox
        .apply_records(&records_at(0, 1, &[reused, fresh.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&outcome), [(ParkReason::EventIdConflict, 1)]);
    assert_eq!(
        (
            outcome.processed,
            outcome.business_duplicates,
            outcome.lines_reserved
        ),
        (1, 0, 1)
    );
    let status: String =
        sqlx::query_scalar("SELECT status FROM inbox_ledger WHERE message_id = $1")
            .bind(fresh.message_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "processed");
}

#[sqlx::test(migrations = false)]
async fn concurrent_lanes_never_count_a_business_duplicate_against_free_stock(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-S", 10)]).await;
    // Order A on two partitions under two ids (a producer keyed it badly).
    let lane_one = records_at(0, 0, &[order("A", "SKU-S", 2), order("F", "SKU-S", 1)]);
    let lane_two = records_at(1, 0, &[order("A", "SKU-S", 5), order("C", "SKU-S", 4)]);
    let (one, two) = concurrently(&pool, "SKU-S", (&inbox, lane_one), (&inbox, lane_two)).await;
    assert_eq!(
        one.lines_rejected + two.lines_rejected,
        0,
        "{one:?} {two:?}"
    );
    assert_eq!(one.business_duplicates + two.business_duplicates, 1);
    let statuses: Vec<(String, String)> = sqlx::query_as(
        "SELECT aggregate_id, status FROM inbox_ledger ORDER BY aggregate_id, status",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        statuses,
        [
            ("A".into(), "business_duplicate".into()),
            ("A".into(), "processed".into()),
            ("C".into(), "processed".into()),
            ("F".into(), "processed".into()),
        ]
    );
    let a: i64 = scalar(
        &pool,
        "SELECT quantity::bigint FROM order_reservation WHERE order_id = 'A'",
    )
    .await;
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        a + 5,
        "A once, C and F"
    );
}

#[sqlx::test(migrations = false)]
async fn a_second_consumer_name_records_the_event_but_never_reserves_it_again(pool: PgPool) {
    let first = inbox(pool.clone(), &[("SKU-S", 10)]).await;
    let second = Inbox::new(pool.clone().into(), "another-consumer".into());
    let event = order("O-1", "SKU-S", 3);
    let (one, two) = concurrently(
        &pool,
        "SKU-S",
        (&first, records(std::slice::from_ref(&event))),
        (&second, records(&[event])),
    )
    .await;
    assert_eq!(
        (one.processed, two.processed),
        (1, 1),
        "each ledger has it: {one:?} {two:?}"
    );
    assert_eq!(one.business_duplicates + two.business_duplicates, 1);
    assert_eq!(one.lines_reserved + two.lines_reserved, 1);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3
    );
}

#[sqlx::test(migrations = false)]
async fn a_line_a_concurrent_batch_reserved_in_another_days_partition_is_not_reserved_twice(
    pool: PgPool,
) {
    let inbox = inbox(pool.clone(), &[("SKU-M", 10)]).await;
    // A batch of yesterday (its day's partition: no key it shares with
    // today's) reserves the line and commits only after this one took its
    // snapshot.
    let mut yesterday = pool.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
         VALUES (gen_random_uuid(), inbox_today() - 1, 'reserved', 4, 'M-1', 'SKU-M')",
    )
    .execute(&mut *yesterday)
    .await
    .expect("yesterday's reservation");
    sqlx::query("UPDATE inventory_stock SET reserved = reserved + 4 WHERE sku = 'SKU-M'")
        .execute(&mut *yesterday)
        .await
        .expect("yesterday's stock");
    let batch = records(&[order("M-1", "SKU-M", 4)]);
    let today = inbox.apply_records(&batch, None);
    let commit_yesterday = async {
        until_waiting(&pool, 1).await;
        yesterday.commit().await.expect("commit yesterday's batch");
    };
    let (outcome, ()) = tokio::join!(today, commit_yesterday);
    let outcome = outcome.expect("applied");
    assert_eq!(
        (outcome.business_duplicates, outcome.lines_reserved),
        (1, 0),
        "{outcome:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        4
    );
    assert_eq!(
        scalar(&pool, "SELECT count(*) FROM order_reservation").await,
        1
    );
}

/// The schema before the storage of docs/design.md#storage: the migrations
/// up to it, read from the repository.
async fn schema_before_storage_by_the_day(pool: &PgPool) {
    let mut before = sqlx::migrate::Migrator::new(std::path::Path::new("./migrations"))
        .await
        .expect("read migrations");
    before.migrations = before
        .migrations
        .iter()
        .filter(|m| m.version <= 20261204000007)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    before.run(pool).await.expect("migrate to the old schema");
    sqlx::query("SELECT inbox_create_window()")
        .execute(pool)
        .await
        .expect("old window");
}

#[sqlx::test(migrations = false)]
async fn the_storage_migration_keeps_a_populated_database_exact(pool: PgPool) {
    schema_before_storage_by_the_day(&pool).await;
    let old_event = order("OLD-1", "SKU-P", 2);
    let old_batch = records(std::slice::from_ref(&old_event));
    // The old schema's rows: today's event of this consumer (its record
    // as the consumer will see it again), another consumer's on another
    // day and topic, their reservations, made today and three days ago.
    sqlx::raw_sql(
        "INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ('SKU-P', 100, 5);
         INSERT INTO processed_inbox (event_day, consumer, message_id, event_type, aggregate_id,
                                      topic, kafka_partition, kafka_offset, status,
                                      payload_hash, processed_at)
         VALUES (current_date - 1, 'other', gen_random_uuid(), 'OrderPlaced', 'OLD-0',
                 'elsewhere', 3, 41, 'business_duplicate', 7, now() - interval '1 day');",
    )
    .execute(&pool)
    .await
    .expect("old rows");
    sqlx::query(
        "INSERT INTO processed_inbox (event_day, consumer, message_id, event_type, aggregate_id,
                                      topic, kafka_partition, kafka_offset, status,
                                      payload_hash)
         VALUES ($1, 'store-tests', $2, 'OrderPlaced', 'OLD-1', 'orders', 0, 0, 'processed', $3)",
    )
    .bind(old_event.occurred_at.date_naive())
    .bind(old_event.message_id)
    .bind(crate::event::payload_hash(
        old_batch[0].payload.as_deref().unwrap(),
    ))
    .execute(&pool)
    .await
    .expect("the old event's ledger row");
    sqlx::query(
        "INSERT INTO order_reservation (order_id, sku, quantity, status, message_id, created_at)
         VALUES ('OLD-1', 'SKU-P', 2, 'reserved', $1, now()),
                ('OLD-0', 'SKU-P', 3, 'reserved', gen_random_uuid(), now() - interval '3 days')",
    )
    .bind(old_event.message_id)
    .execute(&pool)
    .await
    .expect("old reservations");
    sqlx::query(
        "INSERT INTO inbox_parked (consumer, topic, kafka_partition, kafka_offset, reason, error,
                                   payload, parked_at)
         VALUES ('store-tests', 'orders', 0, 7, 'malformed_json', 'e', 'raw',
                 now() - interval '2 days')",
    )
    .execute(&pool)
    .await
    .expect("an old parked row");
    let days_before: Vec<chrono::NaiveDate> =
        sqlx::query_scalar("SELECT d FROM inbox_window_days() AS d")
            .fetch_all(&pool)
            .await
            .unwrap();

    let inbox = inbox(pool.clone(), &[]).await;

    let ledger: Vec<(String, String, String, i32, i64, String)> = sqlx::query_as(
        "SELECT consumer, topic, aggregate_id, kafka_partition, kafka_offset, status
         FROM inbox_ledger ORDER BY aggregate_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        ledger,
        [
            (
                "other".into(),
                "elsewhere".into(),
                "OLD-0".into(),
                3,
                41,
                "business_duplicate".into()
            ),
            (
                "store-tests".into(),
                "orders".into(),
                "OLD-1".into(),
                0,
                0,
                "processed".into()
            ),
        ]
    );
    let reservations: Vec<(String, i32, bool)> = sqlx::query_as(
        "SELECT order_id, quantity::integer, reserved_day = (created_at AT TIME ZONE 'UTC')::date
         FROM order_reservation ORDER BY order_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        reservations,
        [("OLD-0".into(), 3, true), ("OLD-1".into(), 2, true)]
    );
    let days_after: Vec<chrono::NaiveDate> =
        sqlx::query_scalar("SELECT d FROM inbox_window_days() AS d")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(days_after, days_before, "the window is the same");
    let parked: Vec<(i64, bool, String)> = sqlx::query_as(
        "SELECT kafka_offset, parked_day = (parked_at AT TIME ZONE 'UTC')::date, reason
         FROM inbox_parked",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(parked, [(7, true, "malformed_json".into())]);

    // The old rows still decide: the event again is a duplicate, another
    // event of its order a business duplicate, a new order is applied.
    let again = inbox
        .apply_records(&old_batch, None)
        .await
        .expect("redelivery");
    assert_eq!((again.duplicates, again.processed), (1, 0), "{again:?}");
    let mut later = records(&[order("OLD-1", "SKU-P", 2), order("NEW-1", "SKU-P", 1)]);
    for (offset, record) in (1..).zip(&mut later) {
        record.offset = offset;
    }
    let outcome = inbox.apply_records(&later, None).await.expect("new events");
    assert_eq!(
        (
            outcome.processed,
            outcome.business_duplicates,
            outcome.lines_reserved
        ),
        (2, 1, 1),
        "{outcome:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        6
    );
}

/// A record that is not valid JSON, at the given offset of partition 0.
fn malformed(offset: i64) -> InboundRecord {
    InboundRecord {
        topic: "orders".into(),
        partition: 0,
        offset,
        timestamp: None,
        key: None,
        payload: Some(b"{not json".to_vec()),
        headers: vec![],
    }
}

#[sqlx::test(migrations = false)]
async fn a_record_parked_on_an_earlier_day_is_not_parked_again(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[]).await;
    let first = inbox
        .apply_records(&[malformed(5)], None)
        .await
        .expect("parked");
    assert_eq!(first.newly_parked.len(), 1);
    // The row as if it had been parked yesterday: in yesterday's partition.
    sqlx::raw_sql(&format!(
        "CREATE TABLE inbox_parked_p{} PARTITION OF inbox_parked
         FOR VALUES FROM (inbox_today() - 1) TO (inbox_today());
         UPDATE inbox_parked SET parked_day = parked_day - 1;",
        (Utc::now() - chrono::Duration::days(1)).format("%Y%m%d")
    ))
    .execute(&pool)
    .await
    .expect("yesterday's parked row");
    let again = inbox
        .apply_records(&[malformed(5)], None)
        .await
        .expect("redelivered");
    assert_eq!(
        (again.newly_parked.len(), again.parked_before.len()),
        (0, 1),
        "{again:?}"
    );
    assert_eq!(scalar(&pool, "SELECT count(*) FROM inbox_parked").await, 1);
    // Named by its row, for the DLQ copy it may owe.
    assert_eq!(
        again.parked_before[0].id,
        Some(scalar(&pool, "SELECT id FROM inbox_parked").await)
    );
}

#[sqlx::test(migrations = false)]
async fn a_retry_after_a_lost_answer_counts_what_the_lost_try_did(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-L", 10)]).await;
    let events = orders("L", 3, "SKU-L", 1);
    let mut batch = records(&events);
    batch.push(malformed(3));
    // The try that committed, whose answer never came.
    inbox.apply_records(&batch, None).await.expect("applied");
    // Then one record of the batch already in the ledger, not its own.
    let mut elsewhere = records(&events[..1]);
    elsewhere[0].offset = 9;
    let retried = inbox.apply_records(&batch, None).await.expect("retried");
    assert_eq!(
        (
            retried.processed,
            retried.duplicates,
            retried.newly_parked.len()
        ),
        (0, 3, 0)
    );
    let counted = retried.after_lost_answer();
    assert_eq!(
        (
            counted.processed,
            counted.duplicates,
            counted.fresh_event_times.len(),
            counted.same_record_duplicates.len(),
        ),
        (3, 0, 3, 0),
        "the lost try's events are this batch's"
    );
    assert_eq!(
        counted
            .newly_parked
            .iter()
            .map(|row| (row.offset, row.reason))
            .collect::<Vec<_>>(),
        [(3, ParkReason::MalformedJson)]
    );
    assert!(counted.parked_before.is_empty());
    // A record of another position that is in the ledger stays a duplicate.
    let other = inbox
        .apply_records(&elsewhere, None)
        .await
        .expect("applied")
        .after_lost_answer();
    assert_eq!((other.processed, other.duplicates), (0, 1));
}

/// The pipeline classifies a batch once and applies that batch, again on
/// a retry: the store answers with the offsets to commit, the batch's own.
#[sqlx::test(migrations = false)]
async fn a_batch_classified_once_is_applied_as_is_and_says_what_to_commit(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let mut records = records_at(0, 5, &orders("O", 2, "SKU-A", 1));
    records.extend(records_at(3, 0, &orders("P", 1, "SKU-A", 1)));
    // Classified before the window was ever read: parked by the empty
    // window in the batch, judged against the window read at apply.
    let batch = inbox.classify(records);
    assert!(batch
        .items()
        .iter()
        .all(|item| crate::batch::park_reason(item) == Some(ParkReason::OutsideDedupWindow)));
    let to_commit = BTreeMap::from([
        (("orders".to_string(), 0), 7),
        (("orders".to_string(), 3), 1),
    ]);
    let first = inbox.apply(&batch, None).await.expect("applied");
    assert_eq!((first.processed, first.duplicates), (3, 0));
    assert!(first.newly_parked.is_empty());
    assert_eq!(first.to_commit, to_commit);
    let retried = inbox.apply(&batch, None).await.expect("applied again");
    assert_eq!((retried.processed, retried.duplicates), (0, 3));
    assert_eq!(retried.to_commit, to_commit);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3
    );
}

/// A day's ledger partition dropped after the window was read and the
/// batch classified: the statement finds it missing, the window is read
/// again, and the same batch, judged again without a second parse, parks
/// that day's record; the rest is applied, and every offset committed.
#[sqlx::test(migrations = false)]
async fn a_day_dropped_after_the_batch_was_classified_parks_its_records(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    inbox.refresh_window().await.expect("window");
    let yesterday = Utc::now() - chrono::Duration::days(1);
    let events = [
        order_at("Y-1", "SKU-A", 1, yesterday),
        order("T-1", "SKU-A", 1),
    ];
    let batch = inbox.classify(records_at(0, 0, &events));
    assert_eq!(
        batch.items()[0].disposition,
        crate::batch::Disposition::Candidate
    );
    sqlx::raw_sql(&format!(
        "DROP TABLE processed_inbox_p{}",
        yesterday.format("%Y%m%d")
    ))
    .execute(&pool)
    .await
    .expect("drop yesterday's ledger partition");
    let outcome = inbox.apply(&batch, None).await.expect("applied");
    assert_eq!(outcome.processed, 1, "{outcome:?}");
    assert_eq!(parked_of(&outcome), [(ParkReason::OutsideDedupWindow, 0)]);
    assert_eq!(
        outcome.to_commit,
        BTreeMap::from([(("orders".to_string(), 0), 2)])
    );
    assert_eq!(
        batch.items()[0].disposition,
        crate::batch::Disposition::Candidate,
        "the batch in hand is not changed"
    );
}

#[sqlx::test(migrations = false)]
async fn a_missing_day_of_reservations_or_parked_rows_never_fails_a_batch(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-D", 10)]).await;
    // Maintenance failed for days: today's partitions are gone.
    let today = Utc::now().format("%Y%m%d");
    sqlx::raw_sql(&format!(
        "DROP TABLE order_reservation_p{today}; DROP TABLE inbox_parked_p{today};"
    ))
    .execute(&pool)
    .await
    .expect("drop today's partitions");
    let mut batch = records(&[order("D-1", "SKU-D", 2)]);
    batch.push(malformed(1));
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.lines_reserved,
            outcome.newly_parked.len()
        ),
        (1, 1, 1),
        "{outcome:?}"
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM order_reservation WHERE reserved_day <> inbox_today()"
        )
        .await,
        1
    );
}

#[sqlx::test(migrations = false)]
async fn an_explained_batch_is_applied_and_its_steps_timed_with_either_plan(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    let all = records(&events);
    for (part, generic) in [(&all[..2], true), (&all[2..], false)] {
        let plan = inbox.explain(part, generic).await.expect("explained");
        let steps = plan[0]["Steps"].as_array().expect("the steps, timed");
        let timed = |step: &str| {
            steps
                .iter()
                .any(|s| s[0] == step && s[1].as_f64().is_some_and(|ms| ms >= 0.0))
        };
        for step in ["ledger_seen", "locked", "reservation", "next_position"] {
            assert!(timed(step), "{step} missing from the steps: {steps:?}");
        }
        assert!(plan[0]["Execution Time"].as_f64().is_some());
    }
    // The same two plans again: the generic one prepared once is reused.
    let again = inbox
        .explain(&all[..2], true)
        .await
        .expect("explained again");
    assert!(again[0]["Plan"].is_object());
    assert_eq!(
        scalar(&pool, "SELECT count(*) FROM processed_inbox").await,
        4
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved::bigint FROM inventory_stock").await,
        4
    );
}

/// The same event written out again by its producer: other key order, other
/// spacing, an escaped character.
fn reserialized(event: &OrderPlaced) -> Vec<u8> {
    let line = &event.lines[0];
    format!(
        "{{ \"lines\" : [ {{\"quantity\": {}, \"sku\": \"{}\"}} ],\n  \"order_id\": \"{}\",\
         \"schema_version\": {}, \"occurred_at\": \"{}\", \"event_type\": \"Order\\u0050laced\",\
         \"event_id\": \"{}\" }}",
        line.quantity,
        line.sku,
        event.order_id,
        crate::event::SCHEMA_VERSION,
        event
            .occurred_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        event.message_id
    )
    .into_bytes()
}

#[sqlx::test(migrations = false)]
async fn a_redelivery_formatted_otherwise_is_a_duplicate_and_another_value_a_conflict(
    pool: PgPool,
) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 2);
    inbox
        .apply_records(&records(std::slice::from_ref(&original)), None)
        .await
        .expect("applied");
    let mut again = records(std::slice::from_ref(&original));
    again[0].offset = 1;
    again[0].payload = Some(reserialized(&original));
    assert_ne!(again[0].payload.as_deref(), Some(&original.to_json()[..]));
    // Also within one batch: the first delivery's exact bytes, then the
    // re-serialized one.
    let second = order("O-2", "SKU-A", 3);
    let mut pair = records(&[second.clone(), second.clone()]);
    pair[0].offset = 2;
    pair[1].offset = 3;
    pair[1].payload = Some(reserialized(&second));
    again.extend(pair);
    let outcome = inbox.apply_records(&again, None).await.expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.duplicates,
            outcome.newly_parked.len()
        ),
        (1, 2, 0),
        "{outcome:?}"
    );

    let mut changed = original.clone();
    changed.lines[0].quantity = 3;
    let mut conflict = records(&[changed]);
    conflict[0].offset = 4;
    conflict[0].payload = Some(reserialized(&conflict_event(&original)));
    let outcome = inbox.apply_records(&conflict, None).await.expect("applied");
    assert_eq!(outcome.newly_parked.len(), 1);
    assert_eq!(outcome.newly_parked[0].reason, ParkReason::EventIdConflict);
    assert_eq!(
        scalar(&pool, "SELECT reserved::bigint FROM inventory_stock").await,
        5
    );
}

/// `event` with another quantity under the same id.
fn conflict_event(event: &OrderPlaced) -> OrderPlaced {
    let mut changed = event.clone();
    changed.lines[0].quantity += 1;
    changed
}

#[sqlx::test(migrations = false)]
async fn a_ledger_row_fingerprinted_by_its_bytes_still_knows_its_redelivery(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 2);
    inbox
        .apply_records(&records(std::slice::from_ref(&original)), None)
        .await
        .expect("applied");
    // As a ledger row written before fingerprints were of the parsed event.
    sqlx::query("UPDATE processed_inbox SET payload_hash = $1")
        .bind(crate::event::payload_hash(&original.to_json()))
        .execute(&pool)
        .await
        .expect("old fingerprint");
    let mut again = records(std::slice::from_ref(&original));
    again[0].offset = 1;
    let outcome = inbox.apply_records(&again, None).await.expect("applied");
    assert_eq!(
        (outcome.duplicates, outcome.newly_parked.len()),
        (1, 0),
        "{outcome:?}"
    );
}

/// Builds every filter maintenance would build now.
async fn build_filters(pool: &PgPool) -> Vec<FilterBuilt> {
    let mut built = Vec::new();
    while let Some(day) = build_next_filter(&pool.clone().into())
        .await
        .expect("build a filter")
    {
        built.push(day);
    }
    built
}

/// Builds filters until the one of `day` is clean, and returns those built.
/// A build waits for every transaction older than the day's closing, in
/// any database of the server: the tests running beside this one hold
/// some open for a few seconds.
async fn build_filter_of(pool: &PgPool, day: chrono::NaiveDate) -> Vec<FilterBuilt> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut built = Vec::new();
    loop {
        built.extend(build_filters(pool).await);
        if filter_is_clean(pool, day).await {
            return built;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the filter of {day} not built in 60 s: {built:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Ids in the filter of a day, as its build counted them.
async fn filter_ids(pool: &PgPool, day: chrono::NaiveDate) -> Option<i64> {
    sqlx::query_scalar("SELECT ids FROM inbox_ledger_filter WHERE event_day = $1")
        .bind(day)
        .fetch_one(pool)
        .await
        .expect("the day's filter row")
}

/// Whether a day's filter is built and has seen every late write since.
async fn filter_is_clean(pool: &PgPool, day: chrono::NaiveDate) -> bool {
    sqlx::query_scalar(
        "SELECT coalesce(built_writes = late_writes, false) FROM inbox_ledger_filter
         WHERE event_day = $1",
    )
    .bind(day)
    .fetch_one(pool)
    .await
    .expect("the day's filter row")
}

#[sqlx::test(migrations = false)]
async fn a_closed_days_filter_never_misses_an_id_it_holds(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-F", 100_000)]).await;
    let at = Utc::now() - chrono::Duration::days(5);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..300)
        .map(|n| order_at(&format!("F-{n}"), "SKU-F", 1, at))
        .collect();
    let first = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(first.processed, 300);
    let built = build_filter_of(&pool, day).await;
    let ours = built
        .iter()
        .find(|b| b.day == day)
        .expect("the day's filter");
    // 300 ids at 10 bits at least: 47 words, 64 as a power of two.
    assert_eq!((ours.ids, ours.words), (300, 64));
    assert!(
        built.iter().all(|b| b.day < Utc::now().date_naive()),
        "closed days only: {built:?}"
    );
    assert!(filter_is_clean(&pool, day).await);
    // Every id of the day is one the filter, as the slots lay it out, may
    // hold; of ids it never saw, about 1 %.
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM processed_inbox p
             WHERE p.event_day = CURRENT_DATE - 5
               AND inbox_ledger_filter_may_hold(p.event_day, p.message_id) IS NOT TRUE",
        )
        .await,
        0
    );
    let strangers = scalar(
        &pool,
        "SELECT count(*) FROM generate_series(1, 20000)
         WHERE inbox_ledger_filter_may_hold(CURRENT_DATE - 5, gen_random_uuid())",
    )
    .await;
    assert!(
        strangers < 20000 / 50,
        "{strangers} of 20,000 unseen ids pass"
    );
    // Redelivered: every one a duplicate, through the filter.
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!((again.processed, again.duplicates), (0, 300));
    // An id of the day with another payload is a conflict.
    let mut reused = order("F-other", "SKU-F", 2);
    reused.message_id = events[7].message_id;
    let conflict = inbox
        .apply_records(&records_at(1, 0, &[reused]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&conflict), [(ParkReason::EventIdConflict, 0)]);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        300
    );
    // The slots decide: with their words cleared (as no one but the owner
    // can), the day is not looked up; the ledger's key still refuses the
    // second row, as it refuses a concurrent batch's, and nothing applies.
    sqlx::query(
        "UPDATE inbox_ledger_filter_slot
         SET words = array_fill(0::bigint, ARRAY[cardinality(words)])",
    )
    .execute(&pool)
    .await
    .expect("clear the slots");
    let unseen = inbox
        .apply_records(&records_at(2, 0, &events[..1]), None)
        .await;
    assert!(
        matches!(&unseen, Err(StoreError::Transient { message, .. })
                 if message.contains("a concurrent batch wrote")),
        "{unseen:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        300
    );
}

/// The layout in use: its generation and its days.
async fn layout(pool: &PgPool) -> Option<(i32, Vec<chrono::NaiveDate>)> {
    sqlx::query_as("SELECT generation, days FROM inbox_ledger_filter_layout")
        .fetch_optional(pool)
        .await
        .expect("the layout")
}

/// A migrated database with the store consumer's and the topic's codes,
/// as before a first batch (for rows written by [`ledger_rows`]).
async fn migrated_with_codes(pool: &PgPool) {
    inbox(pool.clone(), &[]).await;
    register_codes(&pool.clone().into(), "store-tests", &["orders".into()])
        .await
        .expect("the codes");
}

/// Writes `ids` ledger rows of `day` (days ago) in one statement, as a
/// batch of the store's consumer would.
async fn ledger_rows(pool: &PgPool, days_ago: i32, ids: i64) {
    sqlx::query(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT gen_random_uuid(), n, 1, CURRENT_DATE - $1, 7, 'p', c.code,
                (SELECT inbox_topic_code('orders')), 'R-' || n
         FROM inbox_consumer c, generate_series(1, $2) AS n
         WHERE c.name = 'store-tests'",
    )
    .bind(days_ago)
    .bind(ids)
    .execute(pool)
    .await
    .expect("ledger rows");
}

#[sqlx::test(migrations = false)]
async fn the_slots_are_laid_out_again_only_when_a_filter_changes(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let five = Utc::now().date_naive() - chrono::Duration::days(5);
    let four = five + chrono::Duration::days(1);
    ledger_rows(&pool, 5, 40).await;
    build_filter_of(&pool, five).await;
    let (generation, days) = layout(&pool).await.expect("laid out");
    assert!(days.contains(&five), "{days:?}");
    // Nothing changed: the slots are not written again.
    build_filters(&pool).await;
    assert_eq!(layout(&pool).await, Some((generation, days.clone())));
    // Another day's filter: laid out beside the first.
    ledger_rows(&pool, 4, 40).await;
    build_filter_of(&pool, four).await;
    let (next, now) = layout(&pool).await.expect("laid out");
    assert!(next != generation, "a new layout");
    assert!(now.contains(&five) && now.contains(&four), "{now:?}");
    assert_eq!(now.len(), days.len() + 1, "{now:?} after {days:?}");
}

#[sqlx::test(migrations = false)]
async fn the_slots_are_laid_out_by_one_instance_at_a_time(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let five = Utc::now().date_naive() - chrono::Duration::days(5);
    ledger_rows(&pool, 5, 40).await;
    build_filter_of(&pool, five).await;
    sqlx::query("DELETE FROM inbox_ledger_filter_layout")
        .execute(&pool)
        .await
        .expect("no layout");
    // Another instance builds or lays out: its lock is held.
    let mut other = pool.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('inventory-inbox:filter'))")
        .execute(&mut *other)
        .await
        .expect("the other instance's lock");
    assert_eq!(build_filters(&pool).await, []);
    assert_eq!(layout(&pool).await, None, "laid out under another's lock");
    other.rollback().await.expect("the other instance ends");
    build_filters(&pool).await;
    let (_, days) = layout(&pool).await.expect("laid out once the lock is free");
    assert!(days.contains(&five), "{days:?}");
}

/// A day of 300,000 ids has 65,536 words: 8,192 slots, laid out in two
/// statements, the second from slot 4,096 of every day, the small ones'
/// words repeated.
#[sqlx::test(migrations = false)]
async fn a_large_day_and_small_ones_are_laid_out_without_missing_an_id(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let today = Utc::now().date_naive();
    ledger_rows(&pool, 6, 300_000).await;
    ledger_rows(&pool, 5, 20_000).await;
    ledger_rows(&pool, 4, 300).await;
    let built = build_filter_of(&pool, today - chrono::Duration::days(4)).await;
    let words: Vec<_> = built.iter().map(|b| (b.ids, b.words)).collect();
    for day in [6, 5, 4] {
        assert!(
            filter_is_clean(&pool, today - chrono::Duration::days(day)).await,
            "{day} days ago: {built:?}"
        );
    }
    assert!(words.contains(&(300_000, 65_536)), "{words:?}");
    assert_eq!(
        scalar(&pool, "SELECT slots FROM inbox_ledger_filter_layout").await,
        8192
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM processed_inbox p
             WHERE p.event_day BETWEEN CURRENT_DATE - 6 AND CURRENT_DATE - 4
               AND p.kafka_offset % CASE p.event_day WHEN CURRENT_DATE - 6 THEN 300
                                                     WHEN CURRENT_DATE - 5 THEN 20
                                                     ELSE 1 END = 0
               AND inbox_ledger_filter_may_hold(p.event_day, p.message_id) IS NOT TRUE",
        )
        .await,
        0,
        "ids the slots miss, of 1,000 of each day (half of them in slots 4,096 and up)"
    );
}

#[sqlx::test(migrations = false)]
async fn a_late_write_into_a_filtered_day_is_seen_until_the_filter_holds_it(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-L", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(4);
    let day = at.date_naive();
    inbox
        .apply_records(&records_at(0, 0, &[order_at("L-0", "SKU-L", 1, at)]), None)
        .await
        .expect("applied");
    build_filter_of(&pool, day).await;
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        0
    );
    // A late event of that day, after its filter was built.
    let late = order_at("L-1", "SKU-L", 1, at);
    inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert!(!filter_is_clean(&pool, day).await, "the late write counts");
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        1,
        "the gauge's count"
    );
    let again = inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert_eq!(
        (again.processed, again.duplicates),
        (0, 1),
        "looked up in full"
    );
    build_filter_of(&pool, day).await;
    let third = inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert_eq!(
        (third.processed, third.duplicates),
        (0, 1),
        "through the new filter"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2
    );
}

#[sqlx::test(migrations = false)]
async fn a_write_the_build_could_not_see_keeps_the_filter_from_use(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(3);
    let day = at.date_naive();
    inbox
        .apply_records(&records_at(0, 0, &[order_at("R-0", "SKU-R", 1, at)]), None)
        .await
        .expect("applied");
    // Another member's batch writes an event of that day and commits only
    // after the build read the day.
    let racing = order_at("R-1", "SKU-R", 1, at);
    let mut open = pool.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT $1, 0, 1, $2, 5, 'p', code, (SELECT inbox_topic_code('orders')), 'R-1'
         FROM inbox_consumer WHERE name = 'store-tests'",
    )
    .bind(racing.message_id)
    .bind(day)
    .execute(&mut *open)
    .await
    .expect("an uncommitted late write");
    // The build reads the day without it, and waits to publish for the
    // batch, which holds the day's row (its late write counted).
    let build = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match build_next_filter(&pool.clone().into())
                .await
                .expect("built")
            {
                Some(built) if built.day == day => return built,
                Some(_) => {}
                // Waiting on transactions of tests beside this one.
                None => {
                    assert!(std::time::Instant::now() < deadline, "no build in 60 s");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    };
    let commit_late_write = async {
        until_waiting(&pool, 1).await;
        open.commit().await.expect("commit the late write");
    };
    let (built, ()) = tokio::join!(build, commit_late_write);
    assert_eq!((built.day, built.ids), (day, 1), "{built:?}");
    assert!(!filter_is_clean(&pool, day).await);
    let redelivered = inbox
        .apply_records(&records_at(0, 1, &[racing]), None)
        .await
        .expect("applied");
    assert_eq!(
        redelivered.processed, 0,
        "the id the filter missed is known"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1
    );
}

#[sqlx::test(migrations = false)]
async fn a_closed_day_without_a_filter_row_is_looked_up_in_full(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(3);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..3)
        .map(|n| order_at(&format!("R-{n}"), "SKU-R", 1, at))
        .collect();
    let before = scalar(
        &pool,
        "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3",
    )
    .await;
    inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(
        scalar(
            &pool,
            "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3"
        )
        .await,
        before + 3,
        "one statement's three late rows count three"
    );
    build_filter_of(&pool, day).await;
    // The day's partition stays, its filter row goes (by hand, as the
    // owner): the day is looked up in full, not skipped.
    sqlx::query("DELETE FROM inbox_ledger_filter WHERE event_day = $1")
        .bind(day)
        .execute(&pool)
        .await
        .expect("delete the filter row");
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!((again.processed, again.duplicates), (0, 3));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3
    );
}

#[sqlx::test(migrations = false)]
async fn yesterdays_filter_is_built_and_used(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-Y", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(1);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..20)
        .map(|n| order_at(&format!("Y-{n}"), "SKU-Y", 1, at))
        .collect();
    inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    build_filter_of(&pool, day).await;
    assert_eq!(filter_ids(&pool, day).await, Some(20), "yesterday's filter");
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        0
    );
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(
        (again.processed, again.duplicates),
        (0, 20),
        "through the filter"
    );
    let mut reused = order_at("Y-other", "SKU-Y", 2, at);
    reused.message_id = events[3].message_id;
    let conflict = inbox
        .apply_records(&records_at(1, 0, &[reused]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&conflict), [(ParkReason::EventIdConflict, 0)]);
    // A late event of yesterday after the build: counted, looked up in full.
    let late = order_at("Y-late", "SKU-Y", 1, at);
    inbox
        .apply_records(&records_at(0, 20, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert!(!filter_is_clean(&pool, day).await, "the late write counts");
    let redelivered = inbox
        .apply_records(&records_at(0, 20, &[late]), None)
        .await
        .expect("applied");
    assert_eq!((redelivered.processed, redelivered.duplicates), (0, 1));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        21
    );
}

/// A batch whose statement wrote yesterday's rows before midnight, by the
/// clock, and commits after: the rows are not late writes, so the filter
/// of yesterday must not be read before that batch has ended.
#[sqlx::test(migrations = false)]
async fn yesterdays_filter_waits_for_a_batch_from_before_midnight(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-M", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(1);
    let day = at.date_naive();
    // A batch of today's first: the consumer's code.
    inbox
        .apply_records(&records_at(1, 0, &[order("M-today", "SKU-M", 1)]), None)
        .await
        .expect("applied");
    // The clock a session sees: the setting inbox.test_clock_day when it
    // has one (this database only), else the database's.
    sqlx::query(
        "CREATE OR REPLACE FUNCTION inbox_clock_day() RETURNS date LANGUAGE sql VOLATILE AS $$
             SELECT coalesce(nullif(current_setting('inbox.test_clock_day', true), '')::date,
                             (clock_timestamp() AT TIME ZONE 'UTC')::date) $$",
    )
    .execute(&pool)
    .await
    .expect("a settable clock");
    // It is yesterday, just before midnight: yesterday is not closed yet.
    sqlx::query("UPDATE inbox_ledger_filter SET closed_xid = NULL WHERE event_day = $1")
        .bind(day)
        .execute(&pool)
        .await
        .expect("yesterday open");
    let before_midnight = order_at("M-0", "SKU-M", 1, at);
    let mut open = pool.begin().await.expect("begin");
    sqlx::query("SELECT set_config('inbox.test_clock_day', $1, true)")
        .bind(day.to_string())
        .execute(&mut *open)
        .await
        .expect("the batch's clock");
    let written = sqlx::query(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT $1, 0, 1, $2, 5, 'p', code, (SELECT inbox_topic_code('orders')), 'M-0'
         FROM inbox_consumer WHERE name = 'store-tests'",
    )
    .bind(before_midnight.message_id)
    .bind(day)
    .execute(&mut *open)
    .await
    .expect("a write of yesterday before midnight");
    assert_eq!(written.rows_affected(), 1);
    // After midnight (the other sessions' clock): the day closes, but its
    // filter is not built while the batch runs.
    let built = build_filters(&pool).await;
    assert!(
        built.iter().all(|b| b.day != day),
        "built while a batch from before midnight ran: {built:?}"
    );
    assert!(!filter_is_clean(&pool, day).await);
    open.commit().await.expect("the batch commits");
    build_filter_of(&pool, day).await;
    assert_eq!(
        filter_ids(&pool, day).await,
        Some(1),
        "built with the batch's row"
    );
    let redelivered = inbox
        .apply_records(&records_at(0, 0, &[before_midnight]), None)
        .await
        .expect("applied");
    // Its id is known (with another payload here: a conflict), never
    // applied a second time.
    assert_eq!(parked_of(&redelivered), [(ParkReason::EventIdConflict, 0)]);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1
    );
}

#[sqlx::test(migrations = false)]
async fn a_batch_makes_its_consumer_code_before_its_topics_codes(pool: PgPool) {
    // Without register_codes, the first batches of two lanes make the codes
    // themselves. One that made its topic's code first and then waited for
    // the consumer's would deadlock with a lane that holds the consumer's
    // code and is about to make the topic's: the codes are made in one order,
    // the consumer's first, the topics' by name. The generic plan (the one
    // a prepared statement gets after five runs) made the topic's first.
    inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let options = (*pool.connect_options())
        .clone()
        .options([("plan_cache_mode", "force_generic_plan")]);
    let generic = sqlx::postgres::PgPoolOptions::new()
        .connect_with(options)
        .await
        .expect("pool");
    let inbox = Inbox::new(generic.into(), "store-tests".into());
    let mut other_lane = pool.begin().await.expect("begin");
    sqlx::query("SELECT inbox_consumer_code('store-tests')")
        .execute(&mut *other_lane)
        .await
        .expect("the consumer's code, uncommitted");
    let batch = records(&[order("O-1", "SKU-A", 1)]);
    let applied = inbox.apply_records(&batch, None);
    let other = async {
        until_waiting(&pool, 1).await;
        sqlx::query("SELECT inbox_topic_code('orders')")
            .execute(&mut *other_lane)
            .await?;
        other_lane.commit().await
    };
    let (applied, other) = tokio::join!(applied, other);
    other.expect("the other lane makes the topic's code without a deadlock");
    assert_eq!(applied.expect("applied").processed, 1);
}

#[sqlx::test(migrations = false)]
async fn the_poison_breaker_holds_from_its_opening_until_resumed_once(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[]).await;
    let other = Inbox::new(inbox.pool().clone(), "another-consumer".into());
    assert_eq!(
        breaker(inbox.pool(), inbox.consumer()).await.expect("read"),
        None
    );

    open_breaker(inbox.pool(), inbox.consumer(), "5 parked in a row")
        .await
        .expect("open");
    let held = breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("opened");
    assert!(held.holds());
    assert_eq!(
        (held.reason.as_str(), held.resumed_by.as_deref()),
        ("5 parked in a row", None)
    );
    assert_eq!(
        breaker(other.pool(), other.consumer()).await.expect("read"),
        None,
        "one consumer's own"
    );

    let resumed = resume_breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("resume")
        .expect("it held");
    assert!(!resumed.holds());
    assert_eq!(resumed.reason, "5 parked in a row");
    assert_eq!(resumed.resumed_by.as_deref(), Some("inventory"));
    assert!(!breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("kept")
        .holds());
    assert_eq!(
        resume_breaker(inbox.pool(), inbox.consumer())
            .await
            .expect("resume"),
        None,
        "nothing held: nothing resumed"
    );

    // Tripped again: held again, for the new reason.
    open_breaker(inbox.pool(), inbox.consumer(), "half of 100 parked")
        .await
        .expect("open");
    let again = breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("opened");
    assert!(again.holds());
    assert_eq!(again.reason, "half of 100 parked");
}

#[sqlx::test(migrations = false)]
async fn a_parked_records_dlq_copy_is_owed_until_marked_sent(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 10)])
        .await
        .with_dlq_copies(true);
    let mut batch = records(&[order("O-1", "SKU-A", 1), order("O-2", "SKU-A", 1)]);
    batch[1].payload = Some(b"{not json".to_vec());
    batch[1].key = Some(b"O-2".to_vec());
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    let id = outcome.newly_parked[0].id.expect("the parked row's id");
    let partition = (batch[1].topic.clone(), batch[1].partition);

    let owed = copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[],
    )
    .await
    .expect("owed");
    assert_eq!(owed.len(), 1);
    let (row, record) = &owed[0];
    assert_eq!(
        (row.id, row.reason, record.offset, record.payload.as_deref()),
        (
            Some(id),
            ParkReason::MalformedJson,
            1,
            Some(&b"{not json"[..])
        )
    );
    assert_eq!(record.key.as_deref(), Some(&b"O-2"[..]));
    // A copy on its way is not owed again; another partition owes nothing.
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[id]
    )
    .await
    .expect("owed")
    .is_empty());
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        &[(partition.0.clone(), partition.1 + 1)],
        &[]
    )
    .await
    .expect("owed")
    .is_empty());

    copies_sent(inbox.pool(), &[id]).await.expect("sent");
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[]
    )
    .await
    .expect("owed")
    .is_empty());
}

/// `event` written out again by its producer: other key order and spacing,
/// its event time the same instant in another offset with every digit.
fn respelled(event: &OrderPlaced) -> Vec<u8> {
    let line = &event.lines[0];
    let offset = chrono::FixedOffset::east_opt(90 * 60).expect("an offset");
    format!(
        "{{ \"lines\": [ {{ \"quantity\": {}, \"sku\": \"{}\" }} ], \"order_id\": \"{}\", \
         \"occurred_at\": \"{}\", \"schema_version\": {}, \"event_type\": \"OrderPlaced\", \
         \"event_id\": \"{}\" }}",
        line.quantity,
        line.sku,
        event.order_id,
        event
            .occurred_at
            .with_timezone(&offset)
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, false),
        crate::event::SCHEMA_VERSION,
        event.message_id,
    )
    .into_bytes()
}

#[sqlx::test(migrations = false)]
async fn a_redelivery_with_its_event_time_respelled_is_a_duplicate_not_a_conflict(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 2);
    inbox
        .apply_records(&records(std::slice::from_ref(&original)), None)
        .await
        .expect("applied");
    // In a later batch, and within one batch after the first delivery.
    let second = order("O-2", "SKU-A", 3);
    let mut again = records_at(0, 1, &[original.clone(), second.clone(), second.clone()]);
    again[0].payload = Some(respelled(&original));
    again[2].payload = Some(respelled(&second));
    assert_ne!(again[0].payload.as_deref(), Some(&original.to_json()[..]));
    let outcome = inbox.apply_records(&again, None).await.expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.duplicates,
            outcome.newly_parked.len()
        ),
        (1, 2, 0),
        "{outcome:?}"
    );
    // Another instant under the same id is another event: a conflict.
    let mut later = original.clone();
    later.occurred_at += chrono::Duration::milliseconds(1);
    let outcome = inbox
        .apply_records(&records_at(0, 4, &[later]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&outcome), [(ParkReason::EventIdConflict, 4)]);
    assert_eq!(
        scalar(&pool, "SELECT reserved::bigint FROM inventory_stock").await,
        5
    );
}
