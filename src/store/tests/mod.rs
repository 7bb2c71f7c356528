//! In-process tests of the store against the real PostgreSQL: each test gets
//! a database of its own (`#[sqlx::test]` creates it on the server that
//! `DATABASE_URL` names, `.cargo/config.toml` sets the local one, and drops
//! it after a pass), migrated by the store's own `migrate`. Fast checks of
//! what the black-box tests in `tests/` prove through the binary.
//!
//! One file per concern; the helpers they share are here:
//!
//! ```text
//! batches          a batch applied once, a refused record parked, a retry
//! conflicts        ids reused, business duplicates, lanes racing for a line,
//!                  a batch that loses a race for an id run again
//! filter           the filters of closed days
//! fingerprint      a redelivery told by its fingerprint
//! maintenance      the pool, parked rows pruned, indexes compacted
//! migrations       migrate, the schema check, the storage migration
//! moved_positions  positions guarded, a database gone back, an operator's move
//! parked           replay, the poison breaker, the DLQ copy
//! window           the window of days read again, a day gone meanwhile
//! ```

mod batches;
mod conflicts;
mod filter;
mod fingerprint;
mod maintenance;
mod migrations;
mod moved_positions;
mod parked;
mod window;

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

async fn scalar(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .expect("a number")
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

/// `event` with another quantity under the same id.
fn conflict_event(event: &OrderPlaced) -> OrderPlaced {
    let mut changed = event.clone();
    changed.lines[0].quantity += 1;
    changed
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
