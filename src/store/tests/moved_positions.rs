//! The positions a batch writes: guarded at an assignment, a database
//! gone back refused, an operator's rewind or skip honoured.

use super::*;

/// The partitions to read again and the database's position of each.
fn positions_of(behind: Behind) -> Vec<(PartitionKey, Option<i64>)> {
    behind
        .positions
        .into_iter()
        .map(|(key, stored)| (key, stored.map(|s| s.next_offset)))
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_database_gone_back_is_refused_before_anything_is_written(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    let batch = records(&events);
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    // As after a restore: the position this inbox wrote is gone.
    sqlx::query("DELETE FROM inbox_position")
        .execute(&pool)
        .await
        .expect("the database goes back");
    let refused = inbox.apply_records(&batch[2..], None).await;
    match refused {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(("orders".into(), 0), None)]);
        }
        other => panic!("expected PositionBehind, got {other:?}"),
    }
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2,
        "nothing of the refused batch"
    );
}

#[sqlx::test(migrations = false)]
async fn positions_read_at_an_assignment_are_guarded_and_carry_the_topics_id(pool: PgPool) {
    let first = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    let batch = records(&events);
    first
        .apply_records(&batch[..1], None)
        .await
        .expect("applied");
    // Another member (or this one restarted) is assigned the partition and
    // reads the database's position of it, with Kafka's id of the topic.
    let key: PartitionKey = ("orders".into(), 0);
    let topic = Uuid::new_v4();
    let member = Inbox::new(pool.clone().into(), "store-tests".into());
    member.positions().expect(
        std::slice::from_ref(&key),
        &BTreeMap::from([(key.clone(), 1)]),
        &BTreeMap::from([("orders".to_string(), topic)]),
    );
    assert_eq!(member.positions().topic_id("orders"), Some(topic));
    assert_eq!(member.positions().topic_id("payments"), None);
    member
        .apply_records(&batch[1..2], None)
        .await
        .expect("applied");
    assert_eq!(
        sqlx::query_scalar::<_, Option<Uuid>>("SELECT topic_id FROM inbox_position")
            .fetch_one(&pool)
            .await
            .expect("the position"),
        Some(topic),
        "the position carries the topic's id from now on"
    );
    // Read again for the same topic, it is the member's own; for a topic
    // of the same name created again since, it is none.
    let keys = std::slice::from_ref(&key);
    assert_eq!(
        member.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
    let recreated = Inbox::new(pool.clone().into(), "store-tests".into());
    recreated.positions().expect(
        keys,
        &BTreeMap::from([(key.clone(), 2)]),
        &BTreeMap::from([("orders".to_string(), Uuid::new_v4())]),
    );
    assert_eq!(
        positions_of(recreated.positions().gone_back(keys).await.expect("asked")),
        [(key.clone(), None)]
    );
    // The database goes back to before what it had when the member read it.
    sqlx::query("UPDATE inbox_position SET next_offset = 1")
        .execute(&pool)
        .await
        .expect("the database goes back");
    let fresh = Inbox::new(pool.clone().into(), "store-tests".into());
    fresh.positions().expect(
        std::slice::from_ref(&key),
        &BTreeMap::from([(key.clone(), 2)]),
        &BTreeMap::new(),
    );
    match fresh.apply_records(&batch[2..], None).await {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(key, Some(1))])
        }
        other => panic!("expected PositionBehind, got {other:?}"),
    }
}

#[sqlx::test(migrations = false)]
async fn only_a_position_behind_the_one_written_is_gone_back(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    let key: PartitionKey = ("orders".into(), 0);
    let keys = std::slice::from_ref(&key);
    let at = |offset: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query("UPDATE inbox_position SET next_offset = $1")
                .bind(offset)
                .execute(&pool)
                .await
                .expect("position moved");
        }
    };
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
    at(6).await;
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default(),
        "ahead is not behind"
    );
    at(2).await;
    let behind = inbox.positions().gone_back(keys).await.expect("asked");
    assert_eq!(positions_of(behind), [(key.clone(), Some(2))]);
    // Expected at the database's position from now on.
    assert_eq!(
        inbox.positions().gone_back(keys).await.expect("asked"),
        Behind::default()
    );
}

#[sqlx::test(migrations = false)]
async fn an_operator_sets_a_position_back_and_the_inbox_sees_who_moved_it(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 4, "SKU-A", 1);
    inbox
        .apply_records(&records(&events), None)
        .await
        .expect("applied");
    let listed = |topic: Option<&'static str>| {
        let pool = inbox.pool().clone();
        async move {
            positions::list(&pool, "store-tests", topic)
                .await
                .expect("listed")
                .into_iter()
                .map(|p| (p.topic, p.partition, p.next_offset))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(None).await, [("orders".to_string(), 0, 4)]);
    assert_eq!(listed(Some("payments")).await, []);
    let set = |partition, offset| {
        let pool = inbox.pool().clone();
        async move {
            positions::set(&pool, "store-tests", "orders", partition, offset)
                .await
                .expect("set")
        }
    };
    assert_eq!(set(0, 1).await, Some(4), "the position before");
    assert_eq!(set(0, 1).await, Some(1));
    assert_eq!(set(7, 3).await, None, "none before");
    assert_eq!(
        listed(Some("orders")).await,
        [("orders".to_string(), 0, 1), ("orders".to_string(), 7, 3)]
    );
    let key: PartitionKey = ("orders".into(), 0);
    let behind = inbox
        .positions()
        .gone_back(std::slice::from_ref(&key))
        .await
        .expect("asked");
    assert!(behind.by_operator(&key));
    assert_eq!(positions_of(behind), [(key.clone(), Some(1))]);
}

/// One batch waits behind `sku`'s held stock row while `during` commits.
async fn while_a_batch_waits<T>(
    pool: &PgPool,
    sku: &str,
    batch: impl std::future::Future<Output = T>,
    during: impl std::future::Future<Output = ()>,
) -> T {
    while_batches_wait(pool, sku, 1, batch, during).await
}

/// The position row of partition 0: next offset, set by an operator, the
/// highest position a batch wrote.
async fn position_row(pool: &PgPool) -> (i64, bool, Option<i64>) {
    sqlx::query_as(
        "SELECT next_offset, moved_by_operator, applied_through FROM inbox_position
         WHERE topic = 'orders' AND kafka_partition = 0",
    )
    .fetch_one(pool)
    .await
    .expect("the position")
}

/// An operator rewinds a partition while a batch of it waits on a stock
/// row's lock, its snapshot taken before the set: the batch must not write
/// its position over the operator's (seen: `greatest(0, 4)` = 4, the
/// rewind undone, `moved_by_operator` cleared). It is refused whole, and
/// the inbox reads the partition from the operator's position.
#[sqlx::test(migrations = false)]
async fn a_rewind_while_a_batch_is_in_flight_is_not_written_over(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let batch = records(&orders("O", 4, "SKU-A", 1));
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    let set = async {
        let before = positions::set(inbox.pool(), "store-tests", "orders", 0, 0)
            .await
            .expect("set");
        assert_eq!(before, Some(2));
    };
    let refused =
        while_a_batch_waits(&pool, "SKU-A", inbox.apply_records(&batch[2..], None), set).await;
    let key: PartitionKey = ("orders".into(), 0);
    match refused {
        Err(StoreError::PositionBehind(behind)) => {
            assert!(behind.by_operator(&key), "{behind:?}");
            assert_eq!(positions_of(behind), [(key.clone(), Some(0))]);
        }
        other => panic!("expected the batch refused, got {other:?}"),
    }
    assert_eq!(
        position_row(&pool).await,
        (0, true, Some(2)),
        "the rewind stands"
    );
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        2,
        "nothing of the refused batch"
    );
    // Read again from 0: the first two are duplicates, the rest applied.
    let again = inbox.apply_records(&batch, None).await.expect("read again");
    assert_eq!((again.processed, again.duplicates), (2, 2));
    assert_eq!(position_row(&pool).await, (4, false, Some(4)));
}

/// An operator skips a partition forward (past records the consumer holds
/// but has not applied, e.g. while the poison breaker holds): the next
/// batch of the records before the skip is refused, not applied, and the
/// inbox reads the partition from the operator's position; a skip while a
/// batch waits on a lock is refused alike.
#[sqlx::test(migrations = false)]
async fn a_skip_forward_is_honoured_by_the_next_batch_and_one_in_flight(pool: PgPool) {
    let inbox = inbox(pool.clone(), &[("SKU-A", 100)]).await;
    let events = orders("O", 12, "SKU-A", 1);
    let batch = records(&events);
    inbox
        .apply_records(&batch[..2], None)
        .await
        .expect("applied");
    positions::set(inbox.pool(), "store-tests", "orders", 0, 6)
        .await
        .expect("set");
    let key: PartitionKey = ("orders".into(), 0);
    match inbox.apply_records(&batch[2..4], None).await {
        Err(StoreError::PositionBehind(behind)) => {
            assert_eq!(positions_of(behind), [(key.clone(), Some(6))]);
        }
        other => panic!("expected the batch refused, got {other:?}"),
    }
    assert_eq!(position_row(&pool).await, (6, true, Some(2)));
    inbox
        .apply_records(&batch[6..8], None)
        .await
        .expect("from the skip");
    assert_eq!(position_row(&pool).await, (8, false, Some(8)));
    // Skipped while the next batch waits for its stock row.
    let set = async {
        positions::set(inbox.pool(), "store-tests", "orders", 0, 10)
            .await
            .expect("set");
    };
    let refused = while_a_batch_waits(
        &pool,
        "SKU-A",
        inbox.apply_records(&batch[8..10], None),
        set,
    )
    .await;
    assert!(
        matches!(&refused, Err(StoreError::PositionBehind(b)) if b.by_operator(&key)),
        "{refused:?}"
    );
    assert_eq!(position_row(&pool).await, (10, true, Some(8)));
    assert_eq!(
        scalar(&pool, "SELECT reserved FROM inventory_stock").await,
        4,
        "the records skipped never applied"
    );
}

/// What a position lacks below a partition's log start: a database that
/// went back lacks all of it; a position an operator set back lacks only
/// what no batch applied.
#[test]
fn only_records_never_applied_are_lacking_below_the_log_start() {
    let stored = |next_offset, applied_through| positions::Stored {
        next_offset,
        by_operator: false,
        applied_through,
    };
    assert_eq!(stored(10, Some(10)).never_applied_before(40), 30);
    assert_eq!(stored(10, None).never_applied_before(40), 30);
    assert_eq!(stored(2, Some(50)).never_applied_before(40), 0);
    assert_eq!(stored(2, Some(50)).never_applied_before(60), 10);
    assert_eq!(stored(45, Some(50)).never_applied_before(40), 0);
}
