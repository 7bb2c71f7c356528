//! The window of days: read again when old, and a day dropped or
//! missing while a batch is in hand.

use super::*;

#[sqlx::test(migrations = false)]
async fn the_window_is_read_again_once_a_minute_old(pool: PgPool) {
    let inbox = inbox(pool, &[]).await;
    let before = Instant::now();
    assert_eq!(inbox.window.as_of(before), None, "not read yet");
    let read = inbox.refresh_window().await.expect("window");
    let after = Instant::now();
    assert_eq!(inbox.window.as_of(after), Some(read.clone()));
    // Read between `before` and `after`: a minute after `before` it is
    // a minute old at most, a minute after `after` more than a minute.
    assert_eq!(inbox.window.as_of(before + WINDOW_REFRESH), Some(read));
    assert_eq!(
        inbox
            .window
            .as_of(after + WINDOW_REFRESH + Duration::from_millis(1)),
        None,
        "read again after midnight at the latest a minute on"
    );
}

#[sqlx::test(migrations = false)]
async fn the_round_trip_is_timed_when_the_window_is_read(pool: PgPool) {
    let inbox = inbox(pool, &[]).await;
    assert_eq!(inbox.round_trip(), None, "not timed before");
    inbox.refresh_window().await.expect("window");
    let timed = inbox.round_trip().expect("timed");
    assert!(
        timed > Duration::ZERO && timed < Duration::from_secs(5),
        "{timed:?}"
    );
}

/// A day's ledger partition dropped after the window was read and the
/// batch classified: the statement finds it missing, the window is read
/// again, and the same batch, judged again without a second parse, parks
/// that day's record; the rest is applied, and every offset committed.
#[sqlx::test(migrations = false)]
async fn a_day_dropped_after_the_batch_was_classified_parks_its_records(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    inbox.refresh_window().await.expect("window");
    let yesterday = Utc::now() - chrono::Duration::days(1);
    let events = [
        order_at("Y-1", "SKU-A", 1, yesterday),
        order("T-1", "SKU-A", 1),
    ];
    let batch = inbox.classify(records_at(0, 0, &events));
    assert_eq!(
        batch.items()[0].disposition,
        crate::batch::Disposition::Candidate
    );
    sqlx::raw_sql(&format!(
        "DROP TABLE processed_inbox_p{}",
        yesterday.format("%Y%m%d")
    ))
    .execute(&pool)
    .await
    .expect("drop yesterday's ledger partition");
    let outcome = inbox.apply(&batch, None).await.expect("applied");
    assert_eq!(outcome.processed, 1, "{outcome:?}");
    assert_eq!(parked_of(&outcome), [(ParkReason::OutsideDedupWindow, 0)]);
    assert_eq!(
        outcome.to_commit,
        BTreeMap::from([(("orders".to_string(), 0), 2)])
    );
    assert_eq!(
        batch.items()[0].disposition,
        crate::batch::Disposition::Candidate,
        "the batch in hand is not changed"
    );
}

#[sqlx::test(migrations = false)]
async fn a_missing_day_of_reservations_or_parked_rows_never_fails_a_batch(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-D", 10)]).await;
    // Maintenance failed for days: today's partitions are gone.
    let today = Utc::now().format("%Y%m%d");
    sqlx::raw_sql(&format!(
        "DROP TABLE order_reservation_p{today}; DROP TABLE inbox_parked_p{today};"
    ))
    .execute(&pool)
    .await
    .expect("drop today's partitions");
    let mut batch = records(&[order("D-1", "SKU-D", 2)]);
    batch.push(malformed(1));
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.lines_reserved,
            outcome.newly_parked.len()
        ),
        (1, 1, 1),
        "{outcome:?}"
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM order_reservation WHERE reserved_day <> inbox_today()"
        )
        .await,
        1
    );
}
