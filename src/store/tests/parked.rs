//! Parked records: replayed once or parked again with the statement's
//! reason, the poison breaker, the DLQ copy owed.

use super::*;

#[sqlx::test(migrations = false)]
async fn a_parked_record_replayed_is_applied_once_or_stays_parked_with_its_reason(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 10)]).await;
    let unknown = order("R-1", "SKU-R", 1);
    let later = order("R-2", "SKU-Q", 1);
    let mut batch = records(&[unknown, later.clone()]);
    batch.push(malformed(2));
    let parked = inbox.apply_records(&batch, None).await.expect("parked");
    let ids: Vec<i64> = parked
        .newly_parked
        .iter()
        .map(|row| row.id.expect("an id"))
        .collect();
    let [unknown_id, later_id, malformed_id] = ids[..] else {
        panic!("three parked: {parked:?}")
    };
    assert_eq!(
        replay_candidates(inbox.pool(), inbox.consumer(), ParkReason::UnknownSku, None)
            .await
            .expect("candidates"),
        [unknown_id, later_id]
    );
    let listed = list_parked(inbox.pool(), inbox.consumer(), &ParkedFilter::default(), 10)
        .await
        .expect("listed");
    assert_eq!(
        listed.iter().map(|entry| entry.id).collect::<Vec<_>>(),
        [unknown_id, later_id, malformed_id]
    );
    let still = |outcome: ReplayOutcome| match outcome {
        ReplayOutcome::StillParked(reason, _) => reason,
        other => panic!("expected StillParked, got {other:?}"),
    };
    assert_eq!(
        still(
            replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
                .await
                .expect("replayed")
        ),
        ParkReason::UnknownSku
    );
    assert_eq!(
        still(
            replay(inbox.pool(), inbox.consumer(), malformed_id, "store tests")
                .await
                .expect("replayed")
        ),
        ParkReason::MalformedJson
    );
    sqlx::query("INSERT INTO inventory_stock (sku, on_hand, reserved) VALUES ('SKU-R', 5, 0), ('SKU-Q', 5, 0)")
        .execute(&pool)
        .await
        .expect("the SKUs are stocked");
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::Applied
    );
    assert!(matches!(
        replay(inbox.pool(), inbox.consumer(), unknown_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::AlreadyReplayed(_)
    ));
    assert_eq!(
        replay_candidates(inbox.pool(), inbox.consumer(), ParkReason::UnknownSku, None)
            .await
            .expect("candidates"),
        [later_id],
        "a record applied by a replay is no longer a candidate"
    );
    // The other event came again at a later position and was applied.
    let mut again = records(&[later]);
    again[0].offset = 3;
    inbox.apply_records(&again, None).await.expect("applied");
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), later_id, "store tests")
            .await
            .expect("replayed"),
        ReplayOutcome::Duplicate
    );
    assert_eq!(
        replay(inbox.pool(), inbox.consumer(), 424_242, "store tests")
            .await
            .expect("asked"),
        ReplayOutcome::NotFound
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT sum(reserved)::bigint FROM inventory_stock WHERE sku IN ('SKU-R', 'SKU-Q')"
        )
        .await,
        2,
        "each event reserved once"
    );
    // What each replay came to is kept on its row, as the CLI prints it.
    let outcomes: Vec<_> =
        list_parked(inbox.pool(), inbox.consumer(), &ParkedFilter::default(), 10)
            .await
            .expect("listed")
            .into_iter()
            .map(|entry| (entry.id, entry.replay_outcome))
            .collect();
    assert_eq!(
        outcomes[..2],
        [
            (unknown_id, Some("applied".to_string())),
            (later_id, Some("duplicate (already applied)".to_string()))
        ]
    );
    assert!(
        outcomes[2]
            .1
            .as_deref()
            .is_some_and(|text| text.starts_with("still parked: malformed_json: ")),
        "{outcomes:?}"
    );
}

/// A replay that parks the record again says why in the statement's own
/// words: an id conflict stays an id conflict (seen: reported as an
/// unknown SKU), an unknown SKU names the SKU.
#[sqlx::test(migrations = false)]
async fn a_replay_parked_again_reports_the_statements_own_reason(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let original = order("C-1", "SKU-A", 1);
    let unknown = order("C-2", "SKU-Z", 1);
    let batch = records(&[original.clone(), conflict_event(&original), unknown]);
    let parked = inbox.apply_records(&batch, None).await.expect("applied");
    assert_eq!(
        parked_of(&parked),
        [
            (ParkReason::EventIdConflict, 1),
            (ParkReason::UnknownSku, 2)
        ]
    );
    let id = |n: usize| parked.newly_parked[n].id.expect("an id");
    match replay(inbox.pool(), inbox.consumer(), id(0), "store tests")
        .await
        .expect("replayed")
    {
        ReplayOutcome::StillParked(ParkReason::EventIdConflict, detail) => assert!(
            detail.contains(&original.message_id.to_string()),
            "{detail}"
        ),
        other => panic!("expected still parked as an id conflict, got {other:?}"),
    }
    match replay(inbox.pool(), inbox.consumer(), id(1), "store tests")
        .await
        .expect("replayed")
    {
        ReplayOutcome::StillParked(ParkReason::UnknownSku, detail) => {
            assert!(detail.contains("SKU-Z"), "{detail}")
        }
        other => panic!("expected still parked for its SKU, got {other:?}"),
    }
    let stored: String =
        sqlx::query_scalar("SELECT replay_outcome FROM inbox_parked WHERE id = $1")
            .bind(id(0))
            .fetch_one(&pool)
            .await
            .expect("the outcome kept");
    assert!(
        stored.starts_with("still parked: event_id_conflict: "),
        "{stored}"
    );
}

#[sqlx::test(migrations = false)]
async fn the_poison_breaker_holds_from_its_opening_until_resumed_once(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[]).await;
    let other = Inbox::new(inbox.pool().clone(), "another-consumer".into());
    assert_eq!(
        breaker(inbox.pool(), inbox.consumer()).await.expect("read"),
        None
    );

    open_breaker(inbox.pool(), inbox.consumer(), "5 parked in a row")
        .await
        .expect("open");
    let held = breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("opened");
    assert!(held.holds());
    assert_eq!(
        (held.reason.as_str(), held.resumed_by.as_deref()),
        ("5 parked in a row", None)
    );
    assert_eq!(
        breaker(other.pool(), other.consumer()).await.expect("read"),
        None,
        "one consumer's own"
    );

    let resumed = resume_breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("resume")
        .expect("it held");
    assert!(!resumed.holds());
    assert_eq!(resumed.reason, "5 parked in a row");
    assert_eq!(resumed.resumed_by.as_deref(), Some("inventory"));
    assert!(!breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("kept")
        .holds());
    assert_eq!(
        resume_breaker(inbox.pool(), inbox.consumer())
            .await
            .expect("resume"),
        None,
        "nothing held: nothing resumed"
    );

    // Tripped again: held again, for the new reason.
    open_breaker(inbox.pool(), inbox.consumer(), "half of 100 parked")
        .await
        .expect("open");
    let again = breaker(inbox.pool(), inbox.consumer())
        .await
        .expect("read")
        .expect("opened");
    assert!(again.holds());
    assert_eq!(again.reason, "half of 100 parked");
}

#[sqlx::test(migrations = false)]
async fn a_parked_records_dlq_copy_is_owed_until_marked_sent(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 10)])
        .await
        .with_dlq_copies(true);
    let mut batch = records(&[order("O-1", "SKU-A", 1), order("O-2", "SKU-A", 1)]);
    batch[1].payload = Some(b"{not json".to_vec());
    batch[1].key = Some(b"O-2".to_vec());
    let outcome = inbox.apply_records(&batch, None).await.expect("applied");
    let id = outcome.newly_parked[0].id.expect("the parked row's id");
    let partition = (batch[1].topic.clone(), batch[1].partition);

    let owed = copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[],
    )
    .await
    .expect("owed");
    assert_eq!(owed.len(), 1);
    let (row, record) = &owed[0];
    assert_eq!(
        (row.id, row.reason, record.offset, record.payload.as_deref()),
        (
            Some(id),
            ParkReason::MalformedJson,
            1,
            Some(&b"{not json"[..])
        )
    );
    assert_eq!(record.key.as_deref(), Some(&b"O-2"[..]));
    // A copy on its way is not owed again; another partition owes nothing.
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[id]
    )
    .await
    .expect("owed")
    .is_empty());
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        &[(partition.0.clone(), partition.1 + 1)],
        &[]
    )
    .await
    .expect("owed")
    .is_empty());

    copies_sent(inbox.pool(), &[id]).await.expect("sent");
    assert!(copies_owed(
        inbox.pool(),
        inbox.consumer(),
        std::slice::from_ref(&partition),
        &[]
    )
    .await
    .expect("owed")
    .is_empty());
}

/// Every replay of a parked record is kept in its row's history, with its
/// outcome and who replayed it, the last REPLAYS_KEPT of them; the last
/// outcome stays where `parked list` reads it.
#[sqlx::test(migrations = false)]
async fn every_replay_of_a_parked_record_is_kept_up_to_a_bound(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let db: DbPool = pool.clone().into();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   reason, error, payload)
         VALUES (CURRENT_DATE, 'store-tests', 'orders', 0, 7, 'malformed_json', 'e', 'junk')
         RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .expect("a parked row");
    let never = parked_record(&db, "store-tests", id)
        .await
        .expect("read")
        .expect("the row");
    assert!(never.replays.is_empty());
    let times = REPLAYS_KEPT as usize + 5;
    for n in 0..times {
        let outcome = replay(&db, "store-tests", id, &format!("test {n}"))
            .await
            .expect("replay");
        assert!(
            matches!(
                outcome,
                ReplayOutcome::StillParked(ParkReason::MalformedJson, _)
            ),
            "{outcome}"
        );
    }
    let record = parked_record(&db, "store-tests", id)
        .await
        .expect("read")
        .expect("the row");
    assert_eq!(record.replays.len(), REPLAYS_KEPT as usize, "bounded");
    let by: Vec<&str> = record.replays.iter().map(|r| r.by.as_str()).collect();
    assert_eq!(by.first(), Some(&"test 5"), "the oldest went: {by:?}");
    assert_eq!(by.last(), Some(&format!("test {}", times - 1).as_str()));
    assert!(record
        .replays
        .windows(2)
        .all(|pair| pair[0].at <= pair[1].at));
    assert!(
        record.replays[0]
            .outcome
            .starts_with("still parked: malformed_json"),
        "{:?}",
        record.replays[0]
    );
    assert_eq!(
        record.entry.replay_outcome.as_deref(),
        Some(record.replays[REPLAYS_KEPT as usize - 1].outcome.as_str())
    );
    assert_eq!(record.entry.replayed_at, None, "still eligible");
}

/// The parked list is planned with each call's filters, although every
/// session of the service asks for generic plans: an order's records come
/// through the record key's index, not by reading the table in id order
/// (which took 0.7 s at 1,000,000 parked rows).
#[sqlx::test(migrations = false)]
async fn the_parked_list_of_an_order_reads_the_record_key_index(pool: PgPool) {
    migrated_with_codes(&pool).await;
    sqlx::query(
        "INSERT INTO inbox_parked (parked_day, consumer, topic, kafka_partition, kafka_offset,
                                   reason, error, payload, record_key)
         SELECT CURRENT_DATE, 'store-tests', 'orders', 0, g, 'malformed_json', 'e', 'junk',
                convert_to('ORD-' || g, 'UTF8')
         FROM generate_series(1, 5000) AS g",
    )
    .execute(&pool)
    .await
    .expect("parked rows");
    sqlx::query("ANALYZE inbox_parked")
        .execute(&pool)
        .await
        .expect("analyze");
    let options = (*pool.connect_options())
        .clone()
        .options([("plan_cache_mode", "force_generic_plan")]);
    let generic: DbPool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("pool")
        .into();
    let key_scans = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT coalesce(sum(idx_scan), 0)::bigint FROM pg_stat_user_indexes
             WHERE indexrelname LIKE 'inbox_parked_p%record_key_idx'",
        )
        .fetch_one(&pool)
        .await
        .expect("index scans")
    };
    let before = key_scans().await;
    let filter = ParkedFilter {
        order: Some("ORD-4242".into()),
        ..ParkedFilter::default()
    };
    let listed = list_parked(&generic, "store-tests", &filter, 50)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].offset, 4242);
    // This backend's counts, flushed as it goes idle after the request.
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(&generic)
        .await
        .expect("flush");
    let mut after = key_scans().await;
    for _ in 0..50 {
        if after > before {
            break;
        }
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&generic)
            .await
            .expect("flush");
        after = key_scans().await;
    }
    assert!(
        after > before,
        "the list read no record-key index ({before} scans before, {after} after)"
    );
}

#[sqlx::test(migrations = false)]
async fn a_record_the_statement_parks_names_its_events_order_not_its_key(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 10)]).await;
    let unknown = order("K-1", "SKU-NOPE", 1);
    let mut batch = records(std::slice::from_ref(&unknown));
    // A producer keyed by something else than the order: the log line and
    // the DLQ copy name the event's order, which the key only stands in
    // for when the record did not decode.
    batch[0].key = Some(b"customer-7".to_vec());
    let outcome = inbox.apply_records(&batch, None).await.expect("parked");
    let [row] = &outcome.newly_parked[..] else {
        panic!("one parked: {outcome:?}")
    };
    assert_eq!(
        (row.reason, row.message_id, row.order_id.as_deref()),
        (
            ParkReason::UnknownSku,
            Some(unknown.message_id),
            Some("K-1")
        )
    );
    let stored: (Option<uuid::Uuid>, String) =
        sqlx::query_as("SELECT message_id, reason FROM inbox_parked")
            .fetch_one(&pool)
            .await
            .expect("the parked row");
    assert_eq!(stored, (Some(unknown.message_id), "unknown_sku".to_owned()));
}
