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
    let report = maintain(&db).await.expect("maintain");
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
    let again = maintain(&db).await.expect("maintain");
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
