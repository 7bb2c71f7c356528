//! An id reused with another payload or day, a business duplicate,
//! batches of concurrent lanes or consumer names racing for a line, and a
//! batch that loses the race for an id run again.

use sqlx::{Connection as _, Executor as _, PgConnection};

use super::*;

#[sqlx::test(migrations = false)]
async fn an_id_reused_with_another_payload_is_a_conflict_not_a_duplicate(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 1);
    let mut reused = order("O-1", "SKU-A", 7);
    reused.message_id = original.message_id;
    let reused_id = reused.message_id;
    inbox
        .apply_records(&records(&[original]), None)
        .await
        .expect("applied");
    let mut batch = records(&[reused]);
    batch[0].offset = 1;
    let outcome = inbox
        .apply_records(&batch, Some("4bf92f3577b34da6a3ce929d0e0e4736"))
        .await
        .expect("applied");
    assert_eq!((outcome.processed, outcome.duplicates), (0, 0));
    assert_eq!(outcome.newly_parked.len(), 1);
    let row = &outcome.newly_parked[0];
    assert_eq!(row.reason, ParkReason::EventIdConflict);
    assert_eq!(
        (row.message_id, row.order_id.as_deref()),
        (Some(reused_id), Some("O-1"))
    );
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

/// Runs two batches so that each takes its snapshot before either commits:
/// both wait behind a held stock row, then go one after the other.
async fn concurrently(
    pool: &PgPool,
    sku: &str,
    first: (&Inbox, Vec<InboundRecord>),
    second: (&Inbox, Vec<InboundRecord>),
) -> (BatchOutcome, BatchOutcome) {
    let (first_inbox, first_batch) = first;
    let (second_inbox, second_batch) = second;
    let both = async {
        tokio::join!(
            first_inbox.apply_records(&first_batch, None),
            second_inbox.apply_records(&second_batch, None)
        )
    };
    let (one, two) = while_batches_wait(pool, sku, 2, both, async {}).await;
    (one.expect("first applied"), two.expect("second applied"))
}

#[sqlx::test(migrations = false)]
async fn an_id_reused_with_another_days_event_time_is_a_conflict(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("O-1", "SKU-A", 3);
    let mut reused = order_at("O-2", "SKU-A", 3, Utc::now() - chrono::Duration::days(1));
    reused.message_id = original.message_id;
    inbox
        .apply_records(&records(std::slice::from_ref(&original)), None)
        .await
        .expect("applied");
    let later = inbox
        .apply_records(&records_at(0, 1, &[reused.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&later), [(ParkReason::EventIdConflict, 1)]);
    // The same two records in one batch, on a fresh consumer: the same.
    let other = Inbox::new(pool.clone().into(), "store-tests-2".into());
    let together = other
        .apply_records(&records_at(3, 0, &[original, reused]), None)
        .await
        .expect("applied");
    assert_eq!(together.processed, 1);
    assert_eq!(parked_of(&together), [(ParkReason::EventIdConflict, 1)]);
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM inbox_ledger WHERE consumer = 'store-tests'"
        )
        .await,
        1,
        "one ledger row for one id"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3,
        "O-1's 3 units, never O-2's"
    );
}

#[sqlx::test(migrations = false)]
async fn a_repeat_of_a_parked_records_id_is_judged_as_in_a_later_batch(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    // The same parked record twice: parked twice, at each position.
    let unknown = order("O-1", "SKU-NOPE", 1);
    let again = inbox
        .apply_records(&records(&[unknown.clone(), unknown.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(
        parked_of(&again),
        [(ParkReason::UnknownSku, 0), (ParkReason::UnknownSku, 1)]
    );
    // Its id with a valid payload is applied, as it would be in a batch of
    // its own (the parked record never reached the ledger), and then the
    // parked record again is a conflict with it.
    let mut valid = order("O-2", "SKU-A", 2);
    valid.message_id = unknown.message_id;
    let batch = records_at(0, 2, &[unknown.clone(), valid, unknown]);
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        parked_of(&outcome),
        [
            (ParkReason::UnknownSku, 2),
            (ParkReason::EventIdConflict, 4)
        ]
    );
    assert_eq!(outcome.processed, 1, "the valid payload is applied");
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2
    );
    assert_eq!(
        scalar(&pool, "SELECT next_offset FROM inbox_position").await,
        5
    );
}

#[sqlx::test(migrations = false)]
async fn a_fresh_event_after_a_parked_conflict_on_its_order_line_is_processed(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-T", 100)]).await;
    let first = order("P-1", "SKU-T", 1);
    inbox
        .apply_records(&records(std::slice::from_ref(&first)), None)
        .await
        .expect("applied");
    let mut reused = order("P-2", "SKU-T", 2);
    reused.message_id = first.message_id;
    let fresh = order("P-2", "SKU-T", 2);
    let outcome = inbox
        .apply_records(&records_at(0, 1, &[reused, fresh.clone()]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&outcome), [(ParkReason::EventIdConflict, 1)]);
    assert_eq!(
        (
            outcome.processed,
            outcome.business_duplicates,
            outcome.lines_reserved
        ),
        (1, 0, 1)
    );
    let status: String =
        sqlx::query_scalar("SELECT status FROM inbox_ledger WHERE message_id = $1")
            .bind(fresh.message_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(status, "processed");
}

/// Three events of one order in one batch (its producer sent it again
/// under new ids): the line they share is reserved once, by the first; the
/// second, whose only line the first reserved, is a business duplicate;
/// the third reserves only the line it adds.
#[sqlx::test(migrations = false)]
async fn events_of_one_order_in_one_batch_reserve_a_shared_line_once(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-M", 100), ("SKU-N", 100)]).await;
    let first = order("M-1", "SKU-M", 2);
    let again = order("M-1", "SKU-M", 3);
    let mut more = order("M-1", "SKU-M", 4);
    more.lines.push(OrderLine {
        sku: "SKU-N".into(),
        quantity: 1,
    });
    let outcome = inbox
        .apply_records(&records(&[first, again, more]), None)
        .await
        .expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.business_duplicates,
            outcome.lines_reserved
        ),
        (3, 1, 2)
    );
    let reserved = |sku: &str| format!("SELECT reserved FROM inventory_stock WHERE sku = '{sku}'");
    assert_eq!(scalar(&pool, &reserved("SKU-M")).await, 2);
    assert_eq!(scalar(&pool, &reserved("SKU-N")).await, 1);
}

#[sqlx::test(migrations = false)]
async fn concurrent_lanes_never_count_a_business_duplicate_against_free_stock(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-S", 10)]).await;
    // Order A on two partitions under two ids (a producer keyed it badly).
    let lane_one = records_at(0, 0, &[order("A", "SKU-S", 2), order("F", "SKU-S", 1)]);
    let lane_two = records_at(1, 0, &[order("A", "SKU-S", 5), order("C", "SKU-S", 4)]);
    let (one, two) = concurrently(&pool, "SKU-S", (&inbox, lane_one), (&inbox, lane_two)).await;
    assert_eq!(
        one.lines_rejected + two.lines_rejected,
        0,
        "{one:?} {two:?}"
    );
    assert_eq!(one.business_duplicates + two.business_duplicates, 1);
    let statuses: Vec<(String, String)> = sqlx::query_as(
        "SELECT aggregate_id, status FROM inbox_ledger ORDER BY aggregate_id, status",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        statuses,
        [
            ("A".into(), "business_duplicate".into()),
            ("A".into(), "processed".into()),
            ("C".into(), "processed".into()),
            ("F".into(), "processed".into()),
        ]
    );
    let a: i64 = scalar(
        &pool,
        "SELECT quantity::bigint FROM order_reservation WHERE order_id = 'A'",
    )
    .await;
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        a + 5,
        "A once, C and F"
    );
}

#[sqlx::test(migrations = false)]
async fn a_second_consumer_name_records_the_event_but_never_reserves_it_again(pool: PgPool) {
    let first = inbox(pool.clone(), &[("SKU-S", 10)]).await;
    let second = Inbox::new(pool.clone().into(), "another-consumer".into());
    let event = order("O-1", "SKU-S", 3);
    let (one, two) = concurrently(
        &pool,
        "SKU-S",
        (&first, records(std::slice::from_ref(&event))),
        (&second, records(&[event])),
    )
    .await;
    assert_eq!(
        (one.processed, two.processed),
        (1, 1),
        "each ledger has it: {one:?} {two:?}"
    );
    assert_eq!(one.business_duplicates + two.business_duplicates, 1);
    assert_eq!(one.lines_reserved + two.lines_reserved, 1);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3
    );
}

#[sqlx::test(migrations = false)]
async fn a_line_a_concurrent_batch_reserved_in_another_days_partition_is_not_reserved_twice(
    pool: PgPool,
) {
    let inbox = inbox(pool.clone(), &[("SKU-M", 10)]).await;
    // A batch of yesterday (its day's partition: no key it shares with
    // today's) reserves the line and commits only after this one took its
    // snapshot.
    let mut yesterday = pool.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
         VALUES (gen_random_uuid(), inbox_today() - 1, 'reserved', 4, 'M-1', 'SKU-M')",
    )
    .execute(&mut *yesterday)
    .await
    .expect("yesterday's reservation");
    sqlx::query("UPDATE inventory_stock SET reserved = reserved + 4 WHERE sku = 'SKU-M'")
        .execute(&mut *yesterday)
        .await
        .expect("yesterday's stock");
    let batch = records(&[order("M-1", "SKU-M", 4)]);
    let today = inbox.apply_records(&batch, None);
    let commit_yesterday = async {
        until_waiting(&pool, 1).await;
        yesterday.commit().await.expect("commit yesterday's batch");
    };
    let (outcome, ()) = tokio::join!(today, commit_yesterday);
    let outcome = outcome.expect("applied");
    assert_eq!(
        (outcome.business_duplicates, outcome.lines_reserved),
        (1, 0),
        "{outcome:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        4
    );
    assert_eq!(
        scalar(&pool, "SELECT count(*) FROM order_reservation").await,
        1
    );
}

/// The reservations of a closed day are looked up once maintenance found
/// that day holds one; the empty closed days before it are not; a batch
/// that writes before the first day looked up (the clock went back) moves
/// it back.
#[sqlx::test(migrations = false)]
async fn reservations_are_looked_up_from_the_first_day_that_holds_one(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 10)]).await;
    let db: DbPool = pool.clone().into();
    let first_day = || async {
        scalar(
            &pool,
            "SELECT (inbox_today() - first_day)::bigint FROM inbox_reservation_start",
        )
        .await
    };
    maintain(&db, MaintenanceTrigger::Command)
        .await
        .expect("maintained");
    // Every closed day empty: yesterday is the first looked up.
    assert_eq!(first_day().await, 1);
    // A line a batch reserved three days ago.
    sqlx::query(
        "INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
         VALUES (gen_random_uuid(), inbox_today() - 3, 'reserved', 4, 'R-1', 'SKU-R')",
    )
    .execute(&pool)
    .await
    .expect("a reservation three days ago");
    maintain(&db, MaintenanceTrigger::Command)
        .await
        .expect("maintained");
    assert_eq!(first_day().await, 3);
    let again = inbox
        .apply_records(&records(&[order("R-1", "SKU-R", 4)]), None)
        .await
        .expect("applied");
    assert_eq!((again.business_duplicates, again.lines_reserved), (1, 0));
    // The clock went back past the first day: the batch moves it back to
    // the day it writes.
    sqlx::query("UPDATE inbox_reservation_start SET first_day = inbox_today() + 1")
        .execute(&pool)
        .await
        .expect("a first day ahead");
    let fresh = inbox
        .apply_records(&records_at(0, 1, &[order("R-2", "SKU-R", 1)]), None)
        .await
        .expect("applied");
    assert_eq!((fresh.processed, fresh.lines_reserved), (1, 1));
    assert_eq!(first_day().await, 0);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1
    );
}

/// A batch that loses the race for one of its ids (a concurrent writer
/// commits that id's ledger row between the batch's look-up and its write)
/// is run again at once, not failed as transient: the second run judges
/// the id against the row that won, and the rest of the batch is applied.
#[sqlx::test(migrations = false)]
async fn a_batch_that_loses_the_race_for_an_id_is_run_again_at_once(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 3, "SKU-A", 1);
    let outcome = losing_races(&pool, &inbox, &events, &[1])
        .await
        .expect("applied after the race, not failed");
    assert_eq!(parked_of(&outcome), [(ParkReason::EventIdConflict, 1)]);
    assert_eq!((outcome.processed, outcome.lines_reserved), (2, 2));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2
    );
}

/// A batch is run again at once for as many races as `MAX_RACES`; one
/// more, and it fails as transient (the pipeline retries it after a
/// pause), having written nothing.
#[sqlx::test(migrations = false)]
async fn a_batch_that_keeps_losing_races_fails_as_transient(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let races = super::super::apply::MAX_RACES as usize;
    let events = orders("O", races + 2, "SKU-A", 1);
    let contested: Vec<usize> = (0..races).collect();
    let outcome = losing_races(&pool, &inbox, &events[..races + 1], &contested)
        .await
        .expect("applied after as many races as are run again");
    assert_eq!(
        outcome.parked_before.len() + outcome.newly_parked.len(),
        races
    );
    assert_eq!(outcome.processed, 1);

    let later = Inbox::new(pool.clone().into(), "store-tests".into());
    let contested: Vec<usize> = (0..=races).collect();
    let refused = losing_races(
        &pool,
        &later,
        &orders("P", races + 2, "SKU-A", 1),
        &contested,
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(StoreError::Transient {
                reason: RetryReason::SerializationFailure,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1,
        "the refused batch wrote nothing"
    );
}

/// Applies `events` as one batch of partition 0 at offset 0 while each
/// `contested` one's id has a winner: a ledger row of another payload,
/// written before the batch looks its ids up by a transaction of its own,
/// committed only once the batch waits for it; the batch loses one race
/// for each.
async fn losing_races(
    pool: &PgPool,
    inbox: &Inbox,
    events: &[OrderPlaced],
    contested: &[usize],
) -> Result<BatchOutcome, StoreError> {
    register_codes(&pool.clone().into(), "store-tests", &["orders".into()])
        .await
        .expect("the codes");
    let mut winners = Vec::new();
    for event in contested.iter().map(|&at| &events[at]) {
        // A connection of its own: the pool's few are the batch's.
        let mut winner = PgConnection::connect_with(&pool.connect_options())
            .await
            .expect("the winner's connection");
        winner.execute("BEGIN").await.expect("begin");
        sqlx::query(
            "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                          kafka_partition, status, consumer, topic, aggregate_id)
             SELECT $1, 0, 1, $2, 7, 'p', c.code, (SELECT inbox_topic_code('orders')), $3
             FROM inbox_consumer c
             WHERE c.name = 'store-tests'",
        )
        .bind(event.message_id)
        .bind(event.occurred_at.date_naive())
        .bind(&event.order_id)
        .execute(&mut winner)
        .await
        .expect("the winner's ledger row");
        let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::xid::text")
            .fetch_one(&mut winner)
            .await
            .expect("the winner's transaction id");
        winners.push((xid, winner));
    }
    let release = async {
        while !winners.is_empty() {
            let awaited = awaited_winner(pool, &winners).await;
            let (_, mut winner) = winners.swap_remove(awaited);
            winner.execute("COMMIT").await.expect("the winner commits");
        }
    };
    let batch = records(events);
    let (outcome, ()) = tokio::join!(inbox.apply_records(&batch, None), release);
    outcome
}

/// Which of `winners` a session of this database waits for, once one
/// does. Bounded: a batch that never waits fails the test.
async fn awaited_winner<T>(pool: &PgPool, winners: &[(String, T)]) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let awaited: Vec<String> = sqlx::query_scalar(
            "SELECT l.transactionid::text FROM pg_locks l
             JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE a.datname = current_database() AND l.locktype = 'transactionid'
               AND NOT l.granted",
        )
        .fetch_all(pool)
        .await
        .expect("the locks waited for");
        if let Some(at) = winners.iter().position(|(xid, _)| awaited.contains(xid)) {
            return at;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never waited for a winner"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
