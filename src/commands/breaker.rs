//! `inventory-inbox breaker status|resume`: the poison breaker's state,
//! and its release by an operator.

use inventory_inbox::config::BreakerCommand;
use inventory_inbox::store;

pub async fn run(command: BreakerCommand) -> anyhow::Result<()> {
    match command {
        BreakerCommand::Status { target } => {
            let pool = store::connect(target.database.connection(), 1).await?;
            match store::breaker(&pool, &target.inbox_consumer_name).await? {
                Some(state) if state.holds() => println!(
                    "held since {}: {}; `inventory-inbox breaker resume` resumes consumption",
                    state.opened_at.to_rfc3339(),
                    state.reason
                ),
                Some(state) => println!(
                    "not held; last opened at {} ({}), resumed at {} by {}",
                    state.opened_at.to_rfc3339(),
                    state.reason,
                    state.resumed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                    state.resumed_by.as_deref().unwrap_or("?")
                ),
                None => println!("not held; never opened"),
            }
        }
        BreakerCommand::Resume { target } => {
            let pool = store::connect(target.database.connection(), 1).await?;
            match store::resume_breaker(&pool, &target.inbox_consumer_name).await? {
                Some(state) => println!(
                    "resumed (held since {}: {}); the consumers take records again within seconds",
                    state.opened_at.to_rfc3339(),
                    state.reason
                ),
                None => println!("not held; nothing to resume"),
            }
        }
    }
    Ok(())
}
