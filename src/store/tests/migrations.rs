//! The schema: `migrate` and its lock, the schema check, the retention
//! it writes, the storage migration on a populated database.

use super::*;

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
