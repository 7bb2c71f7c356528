//! The pool's connections, maintenance of the parked rows and
//! compaction of closed days' indexes.

use super::*;

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

#[test]
fn compaction_lifts_the_statement_timeout_unless_behind_a_transaction_pooler() {
    use pooler::Pooler;
    assert!(schema::lifts_statement_timeout(Pooler::None));
    assert!(schema::lifts_statement_timeout(Pooler::Session));
    assert!(!schema::lifts_statement_timeout(Pooler::Transaction));
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
