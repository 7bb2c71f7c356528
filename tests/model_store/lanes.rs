//! Polls applied through concurrent lanes: a batch per partition, applied
//! at once, and the schedules (orders of whole lanes, or a lane the store
//! splits with another between two of its parts) the outcome may be that of.

use std::ops::Range;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use inventory_inbox::event;
use inventory_inbox::store::{BatchOutcome, Inbox, StoreError};
use sqlx::PgPool;
use uuid::Uuid;

use super::generate::{inbound, Batch};
use super::{KNOWN_SKUS, REFUSED_ORDER, SKUS};
use inbox_model::{Model, Record};

/// A poll's records as the store applies them: one batch, or, for a poll
/// applied through lanes, a batch per partition, applied concurrently.
pub struct Lanes {
    pub lanes: Vec<Vec<Record>>,
    /// The lane the store may split (several statements, each its own
    /// transaction), if any: the other lanes may commit between its parts.
    pub splitting: Option<usize>,
    /// Asked for lanes, applied as one batch (see [`lanes`]).
    pub fell_back: bool,
}

pub fn lanes(batch: &Batch, model: &Model) -> Lanes {
    let one = Lanes {
        lanes: vec![batch.records.clone()],
        splitting: None,
        fell_back: false,
    };
    if !batch.lanes {
        return one;
    }
    let mut lanes: Vec<Vec<Record>> = Vec::new();
    for record in &batch.records {
        match lanes
            .iter_mut()
            .find(|lane| lane[0].partition == record.partition)
        {
            Some(lane) => lane.push(record.clone()),
            None => lanes.push(vec![record.clone()]),
        }
    }
    let events: Vec<Vec<Decoded>> = lanes
        .iter()
        .map(|lane| lane.iter().filter_map(decoded).collect())
        .collect();
    // docs/design.md#the-batch-transaction names the one case concurrent
    // batches cannot see: an id reused with another day's event time on two
    // partitions applied in the very same instant (an id in the ledger
    // already is seen by both). Such lanes go as one batch.
    let ledger = &model.tables().ledger;
    let unseen = events.iter().enumerate().any(|(lane, mine)| {
        mine.iter().any(|event| {
            !ledger.contains_key(&(batch.consumer.to_owned(), event.id))
                && events.iter().enumerate().any(|(other, theirs)| {
                    other != lane
                        && theirs
                            .iter()
                            .any(|e| e.id == event.id && e.day != event.day)
                })
        })
    });
    // A lane may be split when it holds the refused order (until the
    // refused record is alone), or an id whose first event names an unknown
    // SKU and a later one another payload (IX002).
    let splits: Vec<usize> = (0..lanes.len())
        .filter(|lane| {
            let events = &events[*lane];
            events.iter().enumerate().any(|(n, event)| {
                event.order == REFUSED_ORDER
                    || (event.unknown_sku
                        && events[n + 1..]
                            .iter()
                            .any(|e| e.id == event.id && e.fingerprint != event.fingerprint))
            })
        })
        .collect();
    // Interleavings of more than one split lane, or of a split lane with two
    // others, are more than the search below tries: one batch instead.
    if unseen || splits.len() > 1 || (splits.len() == 1 && lanes.len() > 2) {
        return Lanes {
            fell_back: true,
            ..one
        };
    }
    let splitting = splits.first().copied().filter(|_| lanes.len() > 1);
    Lanes {
        lanes,
        splitting,
        fell_back: false,
    }
}

/// What deciding how to apply a lane needs of a record that is an event.
pub struct Decoded {
    pub id: Uuid,
    pub day: NaiveDate,
    pub order: String,
    pub fingerprint: i64,
    pub unknown_sku: bool,
}

pub fn decoded(record: &Record) -> Option<Decoded> {
    let decoded = event::decode(record.payload.as_deref(), &record.headers).ok()?;
    let order = decoded.event;
    Some(Decoded {
        id: order.message_id,
        day: order.event_day(),
        unknown_sku: order
            .lines
            .iter()
            .any(|line| !SKUS[..KNOWN_SKUS].contains(&line.sku.as_str())),
        fingerprint: decoded.fingerprint,
        order: order.order_id,
    })
}

/// Applies the lanes' batches, concurrently when there are several: each
/// takes its snapshot while the stock rows are held by another transaction,
/// so that they overlap (or the hold is let go after a moment, for lanes
/// that lock nothing).
pub async fn apply(
    pool: &PgPool,
    inbox: &Inbox,
    lanes: &Lanes,
) -> Vec<Result<BatchOutcome, StoreError>> {
    let batches: Vec<inventory_inbox::batch::Batch> = lanes
        .lanes
        .iter()
        .map(|lane| inbox.classify(lane.iter().map(inbound).collect()))
        .collect();
    if let [batch] = &batches[..] {
        return vec![inbox.apply(batch, None).await];
    }
    // Its own connection, taken before the lanes take theirs.
    let mut watch = pool.acquire().await.expect("a connection to watch from");
    let mut hold = pool.begin().await.expect("begin");
    sqlx::query("SELECT FROM inventory_stock FOR UPDATE")
        .execute(&mut *hold)
        .await
        .expect("hold the stock rows");
    let applied = futures::future::join_all(batches.iter().map(|batch| inbox.apply(batch, None)));
    let release = async {
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(300) {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut *watch)
            .await
            .expect("sessions waiting");
            if waiting >= batches.len() as i64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        hold.commit().await.expect("let the stock rows go");
    };
    tokio::join!(applied, release).0
}

/// Every order of `n` lanes, poll order first.
pub fn orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for first in 0..n {
        for rest in orders(n - 1) {
            let mut order = vec![first];
            order.extend(rest.into_iter().map(|i| if i >= first { i + 1 } else { i }));
            all.push(order);
        }
    }
    all
}

/// A schedule: which records of which lane were applied, in turn.
pub type Schedule = Vec<(usize, Range<usize>)>;

/// The schedules in which the store may have applied the lanes, poll order
/// first: each lane whole (a statement is its own transaction, and a
/// concurrent one makes it run again: docs/design.md#the-batch-transaction),
/// in every order; and, when one lane may be split into several statements,
/// the other lane between any two of its records.
pub fn schedules(lanes: &Lanes) -> Vec<Schedule> {
    let whole = |lane: usize| (lane, 0..lanes.lanes[lane].len());
    let mut all: Vec<Schedule> = orders(lanes.lanes.len())
        .into_iter()
        .map(|order| order.into_iter().map(whole).collect())
        .collect();
    if let Some(split) = lanes.splitting {
        let other = 1 - split;
        let n = lanes.lanes[split].len();
        for cut in 1..n {
            all.push(vec![(split, 0..cut), whole(other), (split, cut..n)]);
        }
    }
    all
}
