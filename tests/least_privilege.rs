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
            matches!(code.as_deref(), Some("42501") | Some("42P01")),
            "{statement}: {error}"
        );
    }
    // Maintenance through the owner's function works for the app role.
    let (locked, created): (bool, i32) =
        sqlx::query_as("SELECT locked, created FROM inbox_maintain(14, 2, 30, 0)")
            .fetch_one(&app)
            .await
            .expect("maintain as the application role");
    assert!(locked);
    assert_eq!(created, 0);
}
