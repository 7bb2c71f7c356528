//! Redeliveries told by their fingerprint: the same event formatted
//! otherwise is a duplicate, another value a conflict.

use super::*;

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
