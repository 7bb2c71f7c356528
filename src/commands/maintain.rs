//! `inventory-inbox maintain`: one maintenance run by hand (partitions,
//! parked rows, ledger filters, index compaction), reported line by line.

use inventory_inbox::config::DatabaseArgs;
use inventory_inbox::service;
use inventory_inbox::store;

pub async fn run(args: DatabaseArgs) -> anyhow::Result<()> {
    args.validate()?;
    let pool = store::connect(args.connection(), 1).await?;
    service::warn_if_retention_differs(&pool, args.retention()).await?;
    let report = store::maintain(&pool, store::MaintenanceTrigger::Command).await?;
    if report.locked {
        println!(
            "maintained; partitions created: {}, dropped: {}; parked rows deleted: {}, payloads cleared: {}",
            report.created, report.dropped, report.parked_deleted, report.payloads_cleared
        );
    } else {
        println!("another instance holds the maintenance lock; nothing done");
    }
    while let Some(built) = store::build_next_filter(&pool).await? {
        println!(
            "ledger filter of {} built: {} ids ({} of them order ids), {} words, {} ms",
            built.day,
            built.ids,
            built.orders,
            built.words,
            built.took.as_millis()
        );
    }
    let compacted = store::compact(&pool).await?;
    if !compacted.owner {
        println!("indexes of closed days: not compacted (only the tables' owner may)");
    } else {
        println!(
            "indexes of closed days compacted: {} ({} -> {} bytes){}",
            compacted.rebuilt,
            compacted.bytes_before,
            compacted.bytes_after,
            if compacted.failed.is_empty() {
                String::new()
            } else {
                format!(
                    "; not rebuilt, tried again next time: {}",
                    compacted.failed.join(", ")
                )
            }
        );
    }
    Ok(())
}
