//! A batch applied: once, its redelivery a no-op, a refused record
//! isolated and parked, a retry after a lost answer, the offsets it says
//! to commit, its steps timed, a SKU short of stock rationed.

use super::*;

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

/// A SKU whose lines want one more than its stock holds: the lines are
/// served first come, first served in batch order, the one that does not
/// fit is rejected, and the stock never goes below zero; a SKU whose lines
/// want exactly its stock has them all.
#[sqlx::test(migrations = false)]
async fn a_sku_short_by_one_rejects_the_line_that_does_not_fit(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 5), ("SKU-E", 5)]).await;
    let outcome = inbox
        .apply_records(
            &records(&[
                order("R-1", "SKU-R", 3),
                order("E-1", "SKU-E", 3),
                order("R-2", "SKU-R", 3),
                order("E-2", "SKU-E", 2),
            ]),
            None,
        )
        .await
        .expect("applied");
    assert_eq!((outcome.lines_reserved, outcome.lines_rejected), (3, 1));
    let reserved = |sku: &str| format!("SELECT reserved FROM inventory_stock WHERE sku = '{sku}'");
    assert_eq!(scalar(&pool, &reserved("SKU-R")).await, 3);
    assert_eq!(scalar(&pool, &reserved("SKU-E")).await, 5);
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM order_reservation WHERE order_id = 'R-2' AND status = 'rejected'"
        )
        .await,
        1
    );
}
