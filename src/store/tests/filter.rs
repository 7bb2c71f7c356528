//! The filters of closed days: never missing an id they hold, their
//! slots laid out, late writes and yesterday's filter.

use super::*;

/// Builds every filter maintenance would build now.
async fn build_filters(pool: &PgPool) -> Vec<FilterBuilt> {
    let mut built = Vec::new();
    while let Some(day) = build_next_filter(&pool.clone().into())
        .await
        .expect("build a filter")
    {
        built.push(day);
    }
    built
}

/// Builds filters until the one of `day` is clean, and returns those built.
/// A build waits for every transaction older than the day's closing, in
/// any database of the server: the tests running beside this one hold
/// some open for a few seconds.
async fn build_filter_of(pool: &PgPool, day: chrono::NaiveDate) -> Vec<FilterBuilt> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut built = Vec::new();
    loop {
        built.extend(build_filters(pool).await);
        if filter_is_clean(pool, day).await {
            return built;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the filter of {day} not built in 60 s: {built:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Ids in the filter of a day, as its build counted them.
async fn filter_ids(pool: &PgPool, day: chrono::NaiveDate) -> Option<i64> {
    sqlx::query_scalar("SELECT ids FROM inbox_ledger_filter WHERE event_day = $1")
        .bind(day)
        .fetch_one(pool)
        .await
        .expect("the day's filter row")
}

/// Whether a day's filter is built and has seen every late write since.
async fn filter_is_clean(pool: &PgPool, day: chrono::NaiveDate) -> bool {
    sqlx::query_scalar(
        "SELECT coalesce(built_writes = late_writes, false) FROM inbox_ledger_filter
         WHERE event_day = $1",
    )
    .bind(day)
    .fetch_one(pool)
    .await
    .expect("the day's filter row")
}

/// Clears every word of the slots, as no one but the owner can: a closed
/// day filtered looks as if it held no key.
async fn clear_slots(pool: &PgPool) {
    sqlx::query(
        "UPDATE inbox_ledger_filter_slot
         SET words = array_fill(0::bigint, ARRAY[cardinality(words)])",
    )
    .execute(pool)
    .await
    .expect("clear the slots");
}

#[sqlx::test(migrations = false)]
async fn a_closed_days_filter_never_misses_an_id_it_holds(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-F", 100_000)]).await;
    let at = Utc::now() - chrono::Duration::days(5);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..300)
        .map(|n| order_at(&format!("F-{n}"), "SKU-F", 1, at))
        .collect();
    let first = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(first.processed, 300);
    let built = build_filter_of(&pool, day).await;
    let ours = built
        .iter()
        .find(|b| b.day == day)
        .expect("the day's filter");
    // 300 ids at 16 bits at least: 75 words, 128 as a power of two.
    assert_eq!((ours.ids, ours.words), (300, 128));
    assert!(
        built.iter().all(|b| b.day < Utc::now().date_naive()),
        "closed days only: {built:?}"
    );
    assert!(filter_is_clean(&pool, day).await);
    // Every id of the day is one the filter, as the slots lay it out, may
    // hold; of ids it never saw, under 0.4 % (128 words: 27 bits an id).
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM processed_inbox p
             WHERE p.event_day = CURRENT_DATE - 5
               AND inbox_ledger_filter_may_hold(p.event_day, p.message_id) IS NOT TRUE",
        )
        .await,
        0
    );
    let strangers = scalar(
        &pool,
        "SELECT count(*) FROM generate_series(1, 20000)
         WHERE inbox_ledger_filter_may_hold(CURRENT_DATE - 5, gen_random_uuid())",
    )
    .await;
    assert!(
        strangers < 20000 / 250,
        "{strangers} of 20,000 unseen ids pass"
    );
    // Redelivered: every one a duplicate, through the filter.
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!((again.processed, again.duplicates), (0, 300));
    // An id of the day with another payload is a conflict.
    let mut reused = order("F-other", "SKU-F", 2);
    reused.message_id = events[7].message_id;
    let conflict = inbox
        .apply_records(&records_at(1, 0, &[reused]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&conflict), [(ParkReason::EventIdConflict, 0)]);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        300
    );
    // The slots decide: with their words cleared (as no one but the owner
    // can), the day is not looked up; the ledger's key still refuses the
    // second row, as it refuses a concurrent batch's, and nothing applies.
    clear_slots(&pool).await;
    let unseen = inbox
        .apply_records(&records_at(2, 0, &events[..1]), None)
        .await;
    assert!(
        matches!(&unseen, Err(StoreError::Transient { reason, message })
                 if reason.as_str() == "serialization_failure"
                     && message.contains("processed_inbox_p")
                     && message.contains("_pkey")),
        "{unseen:?}"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        300
    );
}

/// The layout in use: its generation and its days.
async fn layout(pool: &PgPool) -> Option<(i32, Vec<chrono::NaiveDate>)> {
    sqlx::query_as("SELECT generation, days FROM inbox_ledger_filter_layout")
        .fetch_optional(pool)
        .await
        .expect("the layout")
}

#[sqlx::test(migrations = false)]
async fn the_slots_are_laid_out_again_only_when_a_filter_changes(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let five = Utc::now().date_naive() - chrono::Duration::days(5);
    let four = five + chrono::Duration::days(1);
    ledger_rows(&pool, 5, 40).await;
    build_filter_of(&pool, five).await;
    let (generation, days) = layout(&pool).await.expect("laid out");
    assert!(days.contains(&five), "{days:?}");
    // Nothing changed: the slots are not written again.
    build_filters(&pool).await;
    assert_eq!(layout(&pool).await, Some((generation, days.clone())));
    // Another day's filter: laid out beside the first.
    ledger_rows(&pool, 4, 40).await;
    build_filter_of(&pool, four).await;
    let (next, now) = layout(&pool).await.expect("laid out");
    assert!(next != generation, "a new layout");
    assert!(now.contains(&five) && now.contains(&four), "{now:?}");
    assert_eq!(now.len(), days.len() + 1, "{now:?} after {days:?}");
}

#[sqlx::test(migrations = false)]
async fn the_slots_are_laid_out_by_one_instance_at_a_time(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let five = Utc::now().date_naive() - chrono::Duration::days(5);
    ledger_rows(&pool, 5, 40).await;
    build_filter_of(&pool, five).await;
    sqlx::query("DELETE FROM inbox_ledger_filter_layout")
        .execute(&pool)
        .await
        .expect("no layout");
    // Another instance builds or lays out: its lock is held.
    let mut other = pool.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('inventory-inbox:filter'))")
        .execute(&mut *other)
        .await
        .expect("the other instance's lock");
    assert_eq!(build_filters(&pool).await, []);
    assert_eq!(layout(&pool).await, None, "laid out under another's lock");
    other.rollback().await.expect("the other instance ends");
    build_filters(&pool).await;
    let (_, days) = layout(&pool).await.expect("laid out once the lock is free");
    assert!(days.contains(&five), "{days:?}");
}

/// A day of 300,000 ids has 131,072 words: 16,384 slots, laid out in four
/// statements, the later ones from slots 4,096, 8,192 and 12,288 of every
/// day, the small ones' words repeated.
#[sqlx::test(migrations = false)]
async fn a_large_day_and_small_ones_are_laid_out_without_missing_an_id(pool: PgPool) {
    migrated_with_codes(&pool).await;
    let today = Utc::now().date_naive();
    ledger_rows(&pool, 6, 300_000).await;
    ledger_rows(&pool, 5, 20_000).await;
    ledger_rows(&pool, 4, 300).await;
    let built = build_filter_of(&pool, today - chrono::Duration::days(4)).await;
    let words: Vec<_> = built.iter().map(|b| (b.ids, b.words)).collect();
    for day in [6, 5, 4] {
        assert!(
            filter_is_clean(&pool, today - chrono::Duration::days(day)).await,
            "{day} days ago: {built:?}"
        );
    }
    assert!(words.contains(&(300_000, 131_072)), "{words:?}");
    assert_eq!(
        scalar(&pool, "SELECT slots FROM inbox_ledger_filter_layout").await,
        16384
    );
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM processed_inbox p
             WHERE p.event_day BETWEEN CURRENT_DATE - 6 AND CURRENT_DATE - 4
               AND p.kafka_offset % CASE p.event_day WHEN CURRENT_DATE - 6 THEN 300
                                                     WHEN CURRENT_DATE - 5 THEN 20
                                                     ELSE 1 END = 0
               AND inbox_ledger_filter_may_hold(p.event_day, p.message_id) IS NOT TRUE",
        )
        .await,
        0,
        "ids the slots miss, of 1,000 of each day (three in four in slots 4,096 and up)"
    );
}

#[sqlx::test(migrations = false)]
async fn a_late_write_into_a_filtered_day_is_seen_until_the_filter_holds_it(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-L", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(4);
    let day = at.date_naive();
    inbox
        .apply_records(&records_at(0, 0, &[order_at("L-0", "SKU-L", 1, at)]), None)
        .await
        .expect("applied");
    build_filter_of(&pool, day).await;
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        0
    );
    // A late event of that day, after its filter was built.
    let late = order_at("L-1", "SKU-L", 1, at);
    inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert!(!filter_is_clean(&pool, day).await, "the late write counts");
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        1,
        "the gauge's count"
    );
    let again = inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert_eq!(
        (again.processed, again.duplicates),
        (0, 1),
        "looked up in full"
    );
    build_filter_of(&pool, day).await;
    let third = inbox
        .apply_records(&records_at(0, 1, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert_eq!(
        (third.processed, third.duplicates),
        (0, 1),
        "through the new filter"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2
    );
}

#[sqlx::test(migrations = false)]
async fn a_write_the_build_could_not_see_keeps_the_filter_from_use(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(3);
    let day = at.date_naive();
    inbox
        .apply_records(&records_at(0, 0, &[order_at("R-0", "SKU-R", 1, at)]), None)
        .await
        .expect("applied");
    // Another member's batch writes an event of that day and commits only
    // after the build read the day.
    let racing = order_at("R-1", "SKU-R", 1, at);
    let mut open = pool.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT $1, 0, 1, $2, 5, 'p', code, (SELECT inbox_topic_code('orders')), 'R-1'
         FROM inbox_consumer WHERE name = 'store-tests'",
    )
    .bind(racing.message_id)
    .bind(day)
    .execute(&mut *open)
    .await
    .expect("an uncommitted late write");
    // The build reads the day without it, and waits to publish for the
    // batch, which holds the day's row (its late write counted).
    let build = async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match build_next_filter(&pool.clone().into())
                .await
                .expect("built")
            {
                Some(built) if built.day == day => return built,
                Some(_) => {}
                // Waiting on transactions of tests beside this one.
                None => {
                    assert!(std::time::Instant::now() < deadline, "no build in 60 s");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    };
    let commit_late_write = async {
        until_waiting(&pool, 1).await;
        open.commit().await.expect("commit the late write");
    };
    let (built, ()) = tokio::join!(build, commit_late_write);
    assert_eq!((built.day, built.ids), (day, 1), "{built:?}");
    assert!(!filter_is_clean(&pool, day).await);
    let redelivered = inbox
        .apply_records(&records_at(0, 1, &[racing]), None)
        .await
        .expect("applied");
    assert_eq!(
        redelivered.processed, 0,
        "the id the filter missed is known"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1
    );
}

#[sqlx::test(migrations = false)]
async fn a_closed_day_without_a_filter_row_is_looked_up_in_full(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-R", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(3);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..3)
        .map(|n| order_at(&format!("R-{n}"), "SKU-R", 1, at))
        .collect();
    let before = scalar(
        &pool,
        "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3",
    )
    .await;
    inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(
        scalar(
            &pool,
            "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3"
        )
        .await,
        before + 3,
        "one statement's three late rows count three"
    );
    build_filter_of(&pool, day).await;
    // The day's partition stays, its filter row goes (by hand, as the
    // owner): the day is looked up in full, not skipped.
    sqlx::query("DELETE FROM inbox_ledger_filter WHERE event_day = $1")
        .bind(day)
        .execute(&pool)
        .await
        .expect("delete the filter row");
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!((again.processed, again.duplicates), (0, 3));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        3
    );
}

#[sqlx::test(migrations = false)]
async fn yesterdays_filter_is_built_and_used(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-Y", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(1);
    let day = at.date_naive();
    let events: Vec<OrderPlaced> = (0..20)
        .map(|n| order_at(&format!("Y-{n}"), "SKU-Y", 1, at))
        .collect();
    inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    build_filter_of(&pool, day).await;
    assert_eq!(filter_ids(&pool, day).await, Some(20), "yesterday's filter");
    assert_eq!(
        super::unfiltered_days(&pool.clone().into())
            .await
            .expect("count"),
        0
    );
    let again = inbox
        .apply_records(&records_at(0, 0, &events), None)
        .await
        .expect("applied");
    assert_eq!(
        (again.processed, again.duplicates),
        (0, 20),
        "through the filter"
    );
    let mut reused = order_at("Y-other", "SKU-Y", 2, at);
    reused.message_id = events[3].message_id;
    let conflict = inbox
        .apply_records(&records_at(1, 0, &[reused]), None)
        .await
        .expect("applied");
    assert_eq!(parked_of(&conflict), [(ParkReason::EventIdConflict, 0)]);
    // A late event of yesterday after the build: counted, looked up in full.
    let late = order_at("Y-late", "SKU-Y", 1, at);
    inbox
        .apply_records(&records_at(0, 20, std::slice::from_ref(&late)), None)
        .await
        .expect("applied");
    assert!(!filter_is_clean(&pool, day).await, "the late write counts");
    let redelivered = inbox
        .apply_records(&records_at(0, 20, &[late]), None)
        .await
        .expect("applied");
    assert_eq!((redelivered.processed, redelivered.duplicates), (0, 1));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        21
    );
}

/// A batch whose statement wrote yesterday's rows before midnight, by the
/// clock, and commits after: the rows are not late writes, so the filter
/// of yesterday must not be read before that batch has ended.
#[sqlx::test(migrations = false)]
async fn yesterdays_filter_waits_for_a_batch_from_before_midnight(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-M", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(1);
    let day = at.date_naive();
    // A batch of today's first: the consumer's code.
    inbox
        .apply_records(&records_at(1, 0, &[order("M-today", "SKU-M", 1)]), None)
        .await
        .expect("applied");
    // The clock a session sees: the setting inbox.test_clock_day when it
    // has one (this database only), else the database's.
    sqlx::query(
        "CREATE OR REPLACE FUNCTION inbox_clock_day() RETURNS date LANGUAGE sql VOLATILE AS $$
             SELECT coalesce(nullif(current_setting('inbox.test_clock_day', true), '')::date,
                             (clock_timestamp() AT TIME ZONE 'UTC')::date) $$",
    )
    .execute(&pool)
    .await
    .expect("a settable clock");
    // It is yesterday, just before midnight: yesterday is not closed yet.
    sqlx::query("UPDATE inbox_ledger_filter SET closed_xid = NULL WHERE event_day = $1")
        .bind(day)
        .execute(&pool)
        .await
        .expect("yesterday open");
    let before_midnight = order_at("M-0", "SKU-M", 1, at);
    let mut open = pool.begin().await.expect("begin");
    sqlx::query("SELECT set_config('inbox.test_clock_day', $1, true)")
        .bind(day.to_string())
        .execute(&mut *open)
        .await
        .expect("the batch's clock");
    let written = sqlx::query(
        "INSERT INTO processed_inbox (message_id, kafka_offset, payload_hash, event_day,
                                      kafka_partition, status, consumer, topic, aggregate_id)
         SELECT $1, 0, 1, $2, 5, 'p', code, (SELECT inbox_topic_code('orders')), 'M-0'
         FROM inbox_consumer WHERE name = 'store-tests'",
    )
    .bind(before_midnight.message_id)
    .bind(day)
    .execute(&mut *open)
    .await
    .expect("a write of yesterday before midnight");
    assert_eq!(written.rows_affected(), 1);
    // After midnight (the other sessions' clock): the day closes, but its
    // filter is not built while the batch runs.
    let built = build_filters(&pool).await;
    assert!(
        built.iter().all(|b| b.day != day),
        "built while a batch from before midnight ran: {built:?}"
    );
    assert!(!filter_is_clean(&pool, day).await);
    open.commit().await.expect("the batch commits");
    build_filter_of(&pool, day).await;
    assert_eq!(
        filter_ids(&pool, day).await,
        Some(1),
        "built with the batch's row"
    );
    let redelivered = inbox
        .apply_records(&records_at(0, 0, &[before_midnight]), None)
        .await
        .expect("applied");
    // Its id is known (with another payload here: a conflict), never
    // applied a second time.
    assert_eq!(parked_of(&redelivered), [(ParkReason::EventIdConflict, 0)]);
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        1
    );
}

/// Lines reserved `days_ago` (by a batch of that day): one of `quantity`
/// of `sku` for each of `orders`, written as the owner writes a day's rows;
/// then maintenance finds the first day of reservations that holds one, as
/// it would have since that day.
async fn reserved_on(pool: &PgPool, days_ago: i32, orders: &[String], sku: &str, quantity: i32) {
    sqlx::query(
        "INSERT INTO order_reservation (message_id, reserved_day, status, quantity, order_id, sku)
         SELECT gen_random_uuid(), inbox_today() - $1, 'reserved', $4, o, $3
         FROM unnest($2::text[]) AS o",
    )
    .bind(days_ago)
    .bind(orders)
    .bind(sku)
    .bind(quantity)
    .execute(pool)
    .await
    .expect("reservations of an earlier day");
    sqlx::query("SELECT inbox_reservations_close()")
        .execute(pool)
        .await
        .expect("the first day of reservations");
}

/// A line of an order of its own reserved on each of these days before
/// today: a window of more than 4 closed days holding reservations, which
/// the batch looks up through their filters (fewer, it looks up in full).
async fn reservations_on_days(pool: &PgPool, days_ago: &[i64]) {
    for days in days_ago {
        let days = i32::try_from(*days).expect("days");
        reserved_on(pool, days, &[format!("filler-{days}")], "SKU-FILLER", 1).await;
    }
}

/// Builds the filters of these days before today.
async fn build_filters_of(pool: &PgPool, days_ago: &[i64]) -> Vec<FilterBuilt> {
    let mut built = Vec::new();
    for days in days_ago {
        let day = (Utc::now() - chrono::Duration::days(*days)).date_naive();
        built.extend(build_filter_of(pool, day).await);
    }
    built
}

/// How a batch looks a closed day of the reservations up: 'filter',
/// 'full' or 'none' (inbox_reservation_closed_days).
async fn reservation_lookup(pool: &PgPool, day: chrono::NaiveDate) -> String {
    sqlx::query_scalar(
        "SELECT lookup FROM inbox_reservation_closed_days('-infinity') WHERE reserved_day = $1",
    )
    .bind(day)
    .fetch_one(pool)
    .await
    .expect("the day's look-up")
}

#[sqlx::test(migrations = false)]
async fn a_closed_days_filter_holds_the_orders_its_reservations_name(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-O", 100_000)]).await;
    let day = (Utc::now() - chrono::Duration::days(4)).date_naive();
    let names: Vec<String> = (0..200).map(|n| format!("O-{n}")).collect();
    reserved_on(&pool, 4, &names, "SKU-O", 1).await;
    reservations_on_days(&pool, &[2, 3, 5, 6]).await;
    assert_eq!(
        reservation_lookup(&pool, day).await,
        "full",
        "before its build"
    );
    let built = build_filters_of(&pool, &[2, 3, 4, 5, 6]).await;
    let ours = built
        .iter()
        .find(|b| b.day == day)
        .expect("the day's filter");
    // 200 order ids, no message id: 4,000 bits at least, 64 words.
    assert_eq!((ours.ids, ours.orders, ours.words), (200, 200, 64));
    assert_eq!(reservation_lookup(&pool, day).await, "filter");
    // Every order of the day is one the filter may hold; of orders it
    // never saw, under 0.4 %.
    assert_eq!(
        scalar(
            &pool,
            "SELECT count(*) FROM order_reservation o
             WHERE o.reserved_day = CURRENT_DATE - 4
               AND inbox_reservation_filter_may_hold(o.reserved_day, o.order_id) IS NOT TRUE",
        )
        .await,
        0
    );
    let strangers = scalar(
        &pool,
        "SELECT count(*) FROM generate_series(1, 20000) AS n
         WHERE inbox_reservation_filter_may_hold(CURRENT_DATE - 4, 'stranger-' || n)",
    )
    .await;
    assert!(
        strangers < 20000 / 250,
        "{strangers} of 20,000 unseen orders pass"
    );
    // New events of those orders (other message ids): every one a business
    // duplicate, found through the filter; one of another order is fresh.
    let mut events = orders("O", 100, "SKU-O", 1);
    events.push(order("O-new", "SKU-O", 1));
    let outcome = inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    assert_eq!(
        (
            outcome.processed,
            outcome.business_duplicates,
            outcome.lines_reserved
        ),
        (101, 100, 1),
        "{outcome:?}"
    );
    // The slots decide: with their words cleared (as no one but the owner
    // can), the day's orders are not looked up, and one reserves again.
    clear_slots(&pool).await;
    let unseen = inbox
        .apply_records(&records_at(1, 0, &[order("O-150", "SKU-O", 1)]), None)
        .await
        .expect("applied");
    assert_eq!((unseen.business_duplicates, unseen.lines_reserved), (0, 1));
}

#[sqlx::test(migrations = false)]
async fn a_late_reservation_into_a_filtered_day_is_seen_until_the_filter_holds_it(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-P", 100)]).await;
    let day = (Utc::now() - chrono::Duration::days(3)).date_naive();
    reserved_on(&pool, 3, &["P-0".to_owned()], "SKU-P", 1).await;
    reservations_on_days(&pool, &[2, 4, 5, 6]).await;
    build_filters_of(&pool, &[2, 3, 4, 5, 6]).await;
    assert_eq!(reservation_lookup(&pool, day).await, "filter");
    let before = scalar(
        &pool,
        "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3",
    )
    .await;
    // A line reserved into the day after its filter was built (by hand,
    // or a batch after midnight): counted, and the day looked up in full.
    reserved_on(&pool, 3, &["P-1".to_owned(), "P-2".to_owned()], "SKU-P", 1).await;
    assert_eq!(
        scalar(
            &pool,
            "SELECT late_writes FROM inbox_ledger_filter WHERE event_day = CURRENT_DATE - 3"
        )
        .await,
        before + 2
    );
    assert_eq!(reservation_lookup(&pool, day).await, "full");
    let again = inbox
        .apply_records(&records(&[order("P-1", "SKU-P", 1)]), None)
        .await
        .expect("applied");
    assert_eq!((again.business_duplicates, again.lines_reserved), (1, 0));
    build_filter_of(&pool, day).await;
    assert_eq!(reservation_lookup(&pool, day).await, "filter");
    let third = inbox
        .apply_records(&records_at(0, 1, &[order("P-2", "SKU-P", 1)]), None)
        .await
        .expect("applied");
    assert_eq!(
        (third.business_duplicates, third.lines_reserved),
        (1, 0),
        "through the new filter"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        0
    );
}

/// A filter built before filters held order ids serves the ledger's ids
/// still, the day's reservations are looked up in full, and maintenance
/// builds it again.
#[sqlx::test(migrations = false)]
async fn a_filter_built_without_order_ids_is_built_again(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-Q", 100)]).await;
    let at = Utc::now() - chrono::Duration::days(5);
    let day = at.date_naive();
    inbox
        .apply_records(&records_at(0, 0, &[order_at("Q-0", "SKU-Q", 1, at)]), None)
        .await
        .expect("applied");
    reserved_on(&pool, 5, &["Q-1".to_owned()], "SKU-Q", 1).await;
    reservations_on_days(&pool, &[2, 3, 4, 6, 7]).await;
    build_filters_of(&pool, &[2, 3, 4, 5, 6, 7]).await;
    sqlx::query("UPDATE inbox_ledger_filter SET orders = NULL WHERE event_day = $1")
        .bind(day)
        .execute(&pool)
        .await
        .expect("as built before");
    assert_eq!(reservation_lookup(&pool, day).await, "full");
    assert!(
        filter_is_clean(&pool, day).await,
        "the ledger's ids filtered still"
    );
    let business = inbox
        .apply_records(&records_at(0, 1, &[order("Q-1", "SKU-Q", 1)]), None)
        .await
        .expect("applied");
    assert_eq!(
        (business.business_duplicates, business.lines_reserved),
        (1, 0)
    );
    let rebuilt = build_filters(&pool).await;
    assert!(
        rebuilt.iter().any(|b| b.day == day && b.orders == 1),
        "{rebuilt:?}"
    );
    assert_eq!(reservation_lookup(&pool, day).await, "filter");
}

/// While the window holds at most 4 closed days with reservations, the
/// batch looks them up in full, not through their filters: the slots
/// cleared change nothing.
#[sqlx::test(migrations = false)]
async fn a_few_closed_days_are_looked_up_in_full(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-W", 100)]).await;
    reserved_on(&pool, 4, &["W-0".to_owned()], "SKU-W", 1).await;
    reservations_on_days(&pool, &[2, 3, 5]).await;
    build_filters_of(&pool, &[2, 3, 4, 5]).await;
    let day = (Utc::now() - chrono::Duration::days(4)).date_naive();
    assert_eq!(reservation_lookup(&pool, day).await, "filter");
    clear_slots(&pool).await;
    let again = inbox
        .apply_records(&records(&[order("W-0", "SKU-W", 1)]), None)
        .await
        .expect("applied");
    assert_eq!((again.business_duplicates, again.lines_reserved), (1, 0));
    // A fifth day: through the filters, which the cleared slots empty.
    reservations_on_days(&pool, &[6]).await;
    build_filters_of(&pool, &[6]).await;
    clear_slots(&pool).await;
    let through = inbox
        .apply_records(&records_at(0, 1, &[order("W-0", "SKU-W", 1)]), None)
        .await
        .expect("applied");
    assert_eq!(
        (through.business_duplicates, through.lines_reserved),
        (0, 1)
    );
}
