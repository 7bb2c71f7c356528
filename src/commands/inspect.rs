//! `inventory-inbox inspect`: one event, order or record, as the
//! ledger, the parked table and Kafka hold it.

use inventory_inbox::config::InspectArgs;
use inventory_inbox::inspect::{self, Subject};
use inventory_inbox::store;

pub async fn run(args: InspectArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let run = &args.run;
    let subject = match (&args.event, &args.order, args.offset) {
        (Some(id), _, _) => Subject::Event(*id),
        (_, Some(order), _) => Subject::Order(order.clone()),
        (_, _, Some((partition, offset))) => Subject::Record { partition, offset },
        (None, None, None) => unreachable!("clap requires one of --event, --order, --offset"),
    };
    let kafka = run.kafka_settings(std::env::vars())?;
    let topic = inspect::TopicReader {
        settings: &kafka,
        group: &run.kafka_group_id,
        topic: &run.kafka_topic,
    };
    let pool = store::connect(run.database.connection(), 1).await?;
    let found = inspect::inspect(&pool, &run.inbox_consumer_name, &topic, &subject).await?;
    let text = if args.json {
        format!("{}\n", serde_json::to_string(&found)?)
    } else {
        found.text()
    };
    // A reader that went away (`inspect ... | head -1`) ends the output
    // quietly, as it ends any Unix tool's.
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
