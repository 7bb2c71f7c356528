//! `inventory-inbox migrate`: the schema brought up to date, and the
//! ledger's partitions created and dropped for the retention.

use inventory_inbox::config::DatabaseArgs;
use inventory_inbox::store;

pub async fn run(args: DatabaseArgs) -> anyhow::Result<()> {
    args.validate()?;
    let pool = store::connect(args.connection(), 1).await?;
    let report = store::migrate(&pool, args.retention()).await?;
    println!(
        "migrated; partitions created: {}, dropped: {}",
        report.created, report.dropped
    );
    Ok(())
}
