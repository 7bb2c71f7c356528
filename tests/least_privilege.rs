//! `run` works as a least-privilege role: it can consume (every other test
//! runs the consumer as that role) but cannot change the schema or delete
//! history; partition maintenance goes through the owner's function.

mod common;

use common::*;
use sqlx::postgres::PgPoolOptions;

#[tokio::test]
async fn the_application_role_cannot_change_schema_or_delete_history() {
    let db = TestDb::new().await;
    let app = PgPoolOptions::new()
        .max_connections(1)
        .connect(&db.app_url)
        .await
        .expect("connect as the application role");
    for statement in [
        "DROP TABLE processed_inbox",
        "DELETE FROM processed_inbox",
        "TRUNCATE order_reservation",
        "DELETE FROM inbox_parked",
        "INSERT INTO inventory_stock (sku, on_hand) VALUES ('X', 1)",
        "CREATE TABLE processed_inbox_p20991231 PARTITION OF processed_inbox FOR VALUES FROM ('2099-12-31') TO ('2100-01-01')",
        "SELECT inbox_create_partitions(current_date, current_date + 30)",
        "UPDATE inbox_settings SET retention_days = 1",
        "UPDATE inbox_settings SET reservation_retention_days = 1",
        "DELETE FROM order_reservation",
        "UPDATE order_reservation SET status = 'rejected'",
        "ALTER TABLE order_reservation DETACH PARTITION order_reservation_p20991231",
        "DELETE FROM inbox_consumer",
        "UPDATE inbox_topic SET name = 'x'",
        "SELECT inbox_maintain(-3, 0, 0, 0)",
        // The filters of closed days: only through the functions that
        // check what is published.
        "UPDATE inbox_ledger_filter SET late_writes = 0",
        "DELETE FROM inbox_ledger_filter",
        "DELETE FROM inbox_ledger_filter_chunk",
        "DELETE FROM inbox_ledger_filter_slot",
        "UPDATE inbox_ledger_filter_layout SET slots = 1",
        "SELECT inbox_ledger_late_write()",
    ] {
        let error = sqlx::query(statement)
            .execute(&app)
            .await
            .expect_err(statement);
        let code = error
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.into_owned());
        assert!(
            matches!(code.as_deref(), Some("42501" | "42P01" | "42883")),
            "{statement}: {error}"
        );
    }
    // Maintenance through the owner's function works for the app role, as
    // the database's settings say: it can ask for it, not choose what it
    // keeps.
    let partitions = "SELECT count(*) FROM inbox_window_days()";
    let before: i64 = sqlx::query_scalar(partitions)
        .fetch_one(&app)
        .await
        .unwrap();
    assert_eq!(before, 14 + 1 + 2);
    let (locked, created): (bool, i32) =
        sqlx::query_as("SELECT locked, created FROM inbox_create_window()")
            .fetch_one(&app)
            .await
            .expect("make the window as the application role");
    assert!(locked);
    assert_eq!(created, 0);
    let (locked, dropped): (bool, i32) =
        sqlx::query_as("SELECT locked, dropped FROM inbox_drop_expired()")
            .fetch_one(&app)
            .await
            .expect("drop expired days as the application role");
    assert!(locked);
    assert_eq!(dropped, 0);
    let parked: (i32, i32) = sqlx::query_as("SELECT deleted, cleared FROM inbox_prune_parked(10)")
        .fetch_one(&app)
        .await
        .expect("prune parked rows as the application role");
    assert_eq!(parked, (0, 0));
    let after: i64 = sqlx::query_scalar(partitions)
        .fetch_one(&app)
        .await
        .unwrap();
    assert_eq!(after, before);
}

/// The retention is the database's, written by `migrate` as the owner: a
/// `maintain` or a consumer configured with another keeps the database's,
/// and says so.
#[tokio::test]
async fn the_retention_is_the_databases_and_only_migrate_changes_it() {
    let db = TestDb::new().await;
    let days = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM inbox_window_days()")
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    assert_eq!(days().await, 17);
    let run = |command: &str, url: &str, retention: &str| {
        std::process::Command::new(binary())
            .arg(command)
            .env("DATABASE_URL", url)
            .env("INBOX_RETENTION_DAYS", retention)
            .output()
            .expect("run inventory-inbox")
    };
    let maintained = run("maintain", &db.app_url, "3");
    assert!(maintained.status.success(), "{maintained:?}");
    assert_eq!(days().await, 17, "the database's 14 days are kept");
    assert!(
        String::from_utf8_lossy(&maintained.stderr)
            .contains("differ from the database's retention"),
        "{}",
        String::from_utf8_lossy(&maintained.stderr)
    );
    let migrated = run("migrate", &db.url, "7");
    assert!(migrated.status.success(), "{migrated:?}");
    assert_eq!(days().await, 7 + 1 + 2, "migrate set 7 days");
    let retention: i32 = sqlx::query_scalar("SELECT retention_days FROM inbox_settings")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(retention, 7);
}

/// A login role of the test that is a member of `role` (roles are
/// cluster-wide: made once, by whichever test gets there first), and a
/// pool of one connection to `db` as it.
async fn connect_as_member_of(db: &TestDb, role: &str) -> sqlx::PgPool {
    let login = format!("{role}_test");
    let create = format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{login}') THEN
             CREATE ROLE {login} LOGIN PASSWORD '{login}' IN ROLE {role};
           END IF;
         EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
         END $$"
    );
    sqlx::query(&create)
        .execute(&db.pool)
        .await
        .expect("a login role");
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&format!(
            "postgres://{login}:{login}@127.0.0.1:5432/{}",
            db.name
        ))
        .await
        .unwrap_or_else(|error| panic!("connect as a member of {role}: {error}"))
}

/// Parked rows keep customers' orders: `inventory_operator` reads them
/// without their payload, headers and key, `inventory_parked_reader` with
/// them, and neither writes anything.
#[tokio::test]
async fn only_the_parked_reader_reads_a_parked_records_payload() {
    let db = TestDb::new().await;
    sqlx::query(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   reason, error, payload, headers, record_key)
         VALUES (inbox_today(), 'c', 't', 0, 7, 'invalid_field', 'quantity must be positive',
                 '{\"order_id\":\"o-1\"}', '{\"h\":\"v\"}', 'o-1')",
    )
    .execute(&db.pool)
    .await
    .expect("a parked row");
    let operator = connect_as_member_of(&db, "inventory_operator").await;
    let reader = connect_as_member_of(&db, "inventory_parked_reader").await;
    let without_payload = "SELECT reason, error, kafka_offset FROM inbox_parked";
    for pool in [&operator, &reader] {
        let (reason, error, offset): (String, String, i64) = sqlx::query_as(without_payload)
            .fetch_one(pool)
            .await
            .expect("the parked row without its payload");
        assert_eq!(
            (reason.as_str(), error.as_str(), offset),
            ("invalid_field", "quantity must be positive", 7)
        );
        sqlx::query("SELECT count(*) FROM processed_inbox JOIN inbox_position ON true")
            .fetch_one(pool)
            .await
            .expect("the ledger and positions");
    }
    for column in ["payload", "headers", "record_key", "*"] {
        let statement = format!("SELECT {column} FROM inbox_parked");
        let refused = sqlx::query(&statement)
            .fetch_one(&operator)
            .await
            .expect_err(&statement);
        assert_eq!(
            refused
                .as_database_error()
                .and_then(|e| e.code())
                .as_deref(),
            Some("42501"),
            "{statement}: {refused}"
        );
    }
    let (payload, key): (Vec<u8>, Vec<u8>) =
        sqlx::query_as("SELECT payload, record_key FROM inbox_parked")
            .fetch_one(&reader)
            .await
            .expect("the reader reads the payload");
    assert_eq!(
        (payload.as_slice(), key.as_slice()),
        (&b"{\"order_id\":\"o-1\"}"[..], &b"o-1"[..])
    );
    for statement in [
        "UPDATE inbox_parked SET reason = 'x'",
        "DELETE FROM inbox_parked",
        "INSERT INTO inventory_stock (sku, on_hand) VALUES ('X', 1)",
        "UPDATE inbox_position SET next_offset = 0",
    ] {
        for pool in [&operator, &reader] {
            let refused = sqlx::query(statement)
                .execute(pool)
                .await
                .expect_err(statement);
            assert_eq!(
                refused
                    .as_database_error()
                    .and_then(|e| e.code())
                    .as_deref(),
                Some("42501"),
                "{statement}: {refused}"
            );
        }
    }
}
