//! `inventory-inbox parked ...`: the parked records listed, shown,
//! replayed and dropped.

use inventory_inbox::config::{self, ParkedCommand};
use inventory_inbox::store::{self, DbPool, ParkedFilter, ReplayOutcome};

/// The pool of the database a parked command works on.
async fn parked_pool(target: &config::ParkedTarget) -> anyhow::Result<DbPool> {
    target.database.validate()?;
    Ok(store::connect(target.database.connection(), 1).await?)
}

/// Parked records `parked list` counts at most, to say how many it chose
/// its first ones from: an index-only count of them takes milliseconds.
const PARKED_COUNTED_UP_TO: i64 = 100_000;

pub async fn run(command: ParkedCommand) -> anyhow::Result<()> {
    match command {
        ParkedCommand::List {
            target,
            reason,
            since,
            limit,
            json,
        } => {
            let pool = parked_pool(&target).await?;
            let consumer = &target.inbox_consumer_name;
            let filter = ParkedFilter {
                reason,
                since,
                ..ParkedFilter::default()
            };
            let entries = store::list_parked(&pool, consumer, &filter, limit).await?;
            for entry in &entries {
                if json {
                    println!("{}", serde_json::to_string(entry)?);
                } else {
                    let show = |text: Option<String>| text.unwrap_or_else(|| "-".into());
                    println!(
                        "{:>8}  {}  {:<26}  {}/{}@{}  message {}  order {}  {}{}",
                        entry.id,
                        entry.parked_at.format("%Y-%m-%d %H:%M:%S"),
                        entry.reason,
                        entry.topic,
                        entry.partition,
                        entry.offset,
                        show(entry.message_id.map(|id| id.to_string())),
                        show(entry.order_id.clone()),
                        entry.error,
                        entry
                            .replay_outcome
                            .as_ref()
                            .map(|o| format!("  [replay: {o}]"))
                            .unwrap_or_default()
                    );
                }
            }
            if !json {
                let shown = entries.len() as i64;
                // Counted only when the limit cut the list, and then up to
                // a bound: a broken producer parks millions.
                let total = if shown < limit {
                    None
                } else {
                    Some(
                        store::count_parked(&pool, consumer, reason, since, PARKED_COUNTED_UP_TO)
                            .await?,
                    )
                };
                match total {
                    Some(total) if total.more || total.records > shown => {
                        println!("{shown} of {total} parked record(s)")
                    }
                    _ => println!("{shown} parked record(s)"),
                }
            }
        }
        ParkedCommand::Replay { target, id, reason } => {
            let pool = parked_pool(&target).await?;
            let consumer = &target.inbox_consumer_name;
            let ids = match (id, reason) {
                (Some(id), _) => vec![id],
                (None, Some(reason)) => {
                    store::replay_candidates(&pool, consumer, reason, None).await?
                }
                (None, None) => unreachable!("clap requires an id or --reason"),
            };
            let mut applied = 0;
            for id in &ids {
                let outcome = store::replay(&pool, consumer, *id, "CLI (parked replay)").await?;
                if outcome == ReplayOutcome::NotFound && reason.is_none() {
                    anyhow::bail!(
                        "no parked record {id} for INBOX_CONSUMER_NAME={}: `inventory-inbox parked list` shows the ids",
                        target.inbox_consumer_name
                    );
                }
                applied += usize::from(outcome == ReplayOutcome::Applied);
                println!("{id}: {outcome}");
            }
            println!("replayed {} record(s), {applied} applied", ids.len());
        }
    }
    Ok(())
}
