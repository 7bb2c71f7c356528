//! In-process tests of the store against the real PostgreSQL: each test gets
//! a database of its own (`#[sqlx::test]` creates it on the server that
//! `DATABASE_URL` names, `.cargo/config.toml` sets the local one, and drops
//! it after a pass), migrated by the store's own `migrate`. Fast checks of
//! what the black-box tests in `tests/` prove through the binary.

use chrono::Utc;
use sqlx::PgPool;
use uuid::Uuid;

use super::*;
use crate::event::{OrderLine, OrderPlaced, ParkReason};

const RETENTION: Retention = Retention {
    ledger_days: 14,
    parked_days: 30,
    parked_payload_days: 0,
};

async fn inbox(pool: PgPool, stock: &[(&str, i64)]) -> Inbox {
    migrate(&pool, RETENTION).await.expect("migrate");
    for (sku, on_hand) in stock {
        sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ($1, $2, 0)")
            .bind(sku)
            .bind(on_hand)
            .execute(&pool)
            .await
            .expect("seed stock");
    }
    Inbox::new(pool, "store-tests".into())
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

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("a number")
}

#[sqlx::test(migrations = false)]
async fn a_batch_is_applied_once_and_its_redelivery_changes_nothing(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events: Vec<_> = (0..10)
        .map(|i| order(&format!("O-{i}"), "SKU-A", 2))
        .collect();
    let batch = records(&events);
    let first = inbox.apply(&batch, None).await.expect("applied");
    assert_eq!((first.processed, first.duplicates), (10, 0));
    let again = inbox.apply(&batch, None).await.expect("redelivered");
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
    let mut events: Vec<_> = (0..7)
        .map(|i| order(&format!("O-{i}"), "SKU-A", 1))
        .collect();
    events.insert(3, order("BLOCKED", "SKU-A", 1));
    let outcome = inbox.apply(&records(&events), None).await.expect("applied");
    assert_eq!(outcome.processed, 7);
    let parked: Vec<_> = outcome
        .newly_parked
        .iter()
        .map(|row| (row.reason, row.offset))
        .collect();
    assert_eq!(parked, [(ParkReason::DbRejected, 3)]);
    assert!(outcome.newly_parked[0].error.contains("23514"));
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
    inbox
        .apply(&records(&[original]), None)
        .await
        .expect("applied");
    let mut batch = records(&[reused]);
    batch[0].offset = 1;
    let outcome = inbox
        .apply(&batch, Some("4bf92f3577b34da6a3ce929d0e0e4736"))
        .await
        .expect("applied");
    assert_eq!((outcome.processed, outcome.duplicates), (0, 0));
    assert_eq!(outcome.newly_parked.len(), 1);
    let row = &outcome.newly_parked[0];
    assert_eq!(row.reason, ParkReason::EventIdConflict);
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
    let events: Vec<_> = (0..4)
        .map(|i| order(&format!("O-{i}"), "SKU-A", 1))
        .collect();
    let batch = records(&events);
    inbox.apply(&batch[..2], None).await.expect("applied");
    // As after a restore: the position this inbox wrote is gone.
    sqlx::query("DELETE FROM inbox_position")
        .execute(&pool)
        .await
        .expect("the database goes back");
    let refused = inbox.apply(&batch[2..], None).await;
    match refused {
        Err(StoreError::PositionBehind { positions }) => {
            assert_eq!(
                positions.into_iter().collect::<Vec<_>>(),
                [(("orders".into(), 0), None)]
            );
        }
        other => panic!("expected PositionBehind, got {other:?}"),
    }
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2,
        "nothing of the refused batch"
    );
}
