//! The database read back in the model's shape, to be compared with what
//! the model holds ([`crate::diff`]): the only part of this crate that does
//! I/O.

use std::fmt::Debug;

use sqlx::{PgPool, Row};

use crate::{LedgerRow, Line, Tables};

/// The database read into the model's shape; a key found twice is a
/// difference of its own.
pub async fn tables(pool: &PgPool) -> Result<(Tables, Vec<String>), sqlx::Error> {
    let mut tables = Tables::default();
    let mut twice = Vec::new();
    let mut once = |table: &str, replaced: bool, key: &dyn Debug| {
        if replaced {
            twice.push(format!("{table}: two rows for {key:?}"));
        }
    };
    let ledger = "SELECT consumer, message_id, payload_hash, event_day, aggregate_id, topic,
                         kafka_partition, kafka_offset, status FROM inbox_ledger";
    for row in sqlx::query(ledger).fetch_all(pool).await? {
        let key = (row.try_get("consumer")?, row.try_get("message_id")?);
        let value = LedgerRow {
            fingerprint: row.try_get("payload_hash")?,
            event_day: row.try_get("event_day")?,
            order_id: row.try_get("aggregate_id")?,
            topic: row.try_get("topic")?,
            partition: row.try_get("kafka_partition")?,
            offset: row.try_get("kafka_offset")?,
            business_duplicate: row.try_get::<String, _>("status")? == "business_duplicate",
        };
        once(
            "ledger",
            tables.ledger.insert(key.clone(), value).is_some(),
            &key,
        );
    }
    let lines = "SELECT order_id, sku, quantity::bigint AS quantity, status::text AS status,
                        message_id FROM order_reservation";
    for row in sqlx::query(lines).fetch_all(pool).await? {
        let key = (row.try_get("order_id")?, row.try_get("sku")?);
        let value = Line {
            quantity: row.try_get("quantity")?,
            reserved: row.try_get::<String, _>("status")? == "reserved",
            message_id: row.try_get("message_id")?,
        };
        once(
            "order lines",
            tables.reservations.insert(key.clone(), value).is_some(),
            &key,
        );
    }
    for row in sqlx::query("SELECT sku, reserved FROM inventory_stock")
        .fetch_all(pool)
        .await?
    {
        tables
            .reserved
            .insert(row.try_get("sku")?, row.try_get("reserved")?);
    }
    let parked = "SELECT consumer, topic, kafka_partition, kafka_offset, reason FROM inbox_parked";
    for row in sqlx::query(parked).fetch_all(pool).await? {
        let key = (
            row.try_get("consumer")?,
            row.try_get("topic")?,
            row.try_get("kafka_partition")?,
            row.try_get("kafka_offset")?,
        );
        once(
            "parked",
            tables
                .parked
                .insert(key.clone(), row.try_get("reason")?)
                .is_some(),
            &key,
        );
    }
    let positions = "SELECT consumer, topic, kafka_partition, next_offset FROM inbox_position";
    for row in sqlx::query(positions).fetch_all(pool).await? {
        tables.positions.insert(
            (
                row.try_get("consumer")?,
                row.try_get("topic")?,
                row.try_get("kafka_partition")?,
            ),
            row.try_get("next_offset")?,
        );
    }
    Ok((tables, twice))
}
