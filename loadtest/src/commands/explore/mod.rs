//! `inbox-loadgen explore --seed S`: a fault schedule drawn from the seed
//! ([`schedule`]) played against the real system while the generator sends
//! its mix (duplicates and poison included), then the database checked
//! against the reference model (the `model/` crate) fed with what the topic
//! really holds, read back from Kafka (docs/design.md#checked-against-a-model).
//!
//! The run: the group of the schedule (one to three members, static or
//! dynamic, the classic or the consumer group protocol) is started; the
//! load and the schedule run side by side (members killed, stopped,
//! started, frozen past their session; PostgreSQL restarted, backed up and
//! put back under the running group, failed over to a standby that lacks
//! the last commits; brokers killed; replays through `positions set`;
//! maintenance). Throughout, a member that exits on its own is started
//! again, as its supervisor would, and the report says so. Then whatever
//! is down is brought back, the load ends, and the run waits until the
//! group has committed and the database's positions reached the topic's
//! end offsets. Every record of the topic is read back, fed to the model
//! partition by partition in offset order, and the database's ledger,
//! order lines, stock, parked rows and positions must be the model's: every
//! offset accounted for exactly once.
//!
//! The stock is ample (the generator's seed) and every record of an order
//! goes to one partition, so what the model says does not depend on how the
//! partitions were interleaved; first-come rationing between batches is
//! `tests/model_store.rs`'s to check.
//!
//! A divergence prints the seed, the schedule and what differs; the same
//! seed draws the same schedule again (the moments the system reaches in
//! between are its own).

pub mod schedule;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use crate::commands::flags::{consumer_binary, consumer_env, Mix, Target};
use crate::commands::shell::shell;
use crate::output;
use crate::probes::database::Database;
use crate::probes::group_progress::GroupProgress;
use crate::probes::topic_log;
use crate::workload::fleet::{Member, MemberConfig};
use crate::workload::generate::{Generator, Manifest};
use crate::workload::kafka::Producer;
use crate::workload::produce;

use self::schedule::{Fault, Offered, Protocol, Schedule};

/// How often the supervisor looks for members that exited on their own.
const SUPERVISE_EVERY: Duration = Duration::from_millis(200);
/// Differences printed at most (all of them go to the report).
const PRINTED_DIFFERENCES: usize = 40;

#[derive(Debug, Args)]
pub struct ExploreArgs {
    #[command(flatten)]
    target: Target,

    #[command(flatten)]
    mix: Mix,

    /// The seed the schedule is drawn from.
    #[arg(long)]
    seed: u64,

    /// Seconds of load (a quiet spell of the schedule adds its own); the
    /// faults come in the first three quarters.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,

    /// Events per second.
    #[arg(long, default_value_t = 400.0)]
    rate: f64,

    /// Print the schedule of the seed and exit.
    #[arg(long)]
    schedule_only: bool,

    /// The service binary [default: inventory-inbox beside this program].
    #[arg(long, value_name = "PATH")]
    consumer_bin: Option<PathBuf>,

    /// Consumer group [default: TOPIC-explore].
    #[arg(long)]
    group: Option<String>,

    /// Environment of every member, on top of the target's (repeatable).
    #[arg(long = "consumer-env", value_name = "KEY=VALUE")]
    consumer_env: Vec<String>,

    /// First of the members' metrics ports (one per member).
    #[arg(long, default_value_t = 9480)]
    metrics_port: u16,

    /// Draw the consumer group protocol (KIP-848) too, not only the classic.
    #[arg(long)]
    consumer_protocol: bool,

    /// A member's session in seconds (the classic protocol's
    /// `session.timeout.ms` is set to it; under the consumer protocol it
    /// is the broker's): what a pause outlasts.
    #[arg(long, default_value_t = 10.0)]
    session_seconds: f64,

    /// Shell command restarting PostgreSQL; returns once it answers again.
    #[arg(long, value_name = "COMMAND")]
    restart_database_cmd: Option<String>,

    /// Shell command taking a backup of the database (the one a restore
    /// puts back).
    #[arg(long, value_name = "COMMAND")]
    backup_database_cmd: Option<String>,

    /// Shell command putting the database back to its last backup.
    #[arg(long, value_name = "COMMAND")]
    restore_database_cmd: Option<String>,

    /// Shell command cutting the standby off from its primary.
    #[arg(long, value_name = "COMMAND")]
    cut_replica_cmd: Option<String>,

    /// Shell command killing the primary with -9 and promoting the
    /// standby behind the database's endpoint.
    #[arg(long, value_name = "COMMAND")]
    failover_database_cmd: Option<String>,

    /// Shell command killing a broker with -9; `{node}` is replaced by its
    /// number (1 to --brokers).
    #[arg(long, value_name = "COMMAND")]
    kill_broker_cmd: Option<String>,

    /// Shell command starting the broker that is down; returns once it
    /// answers.
    #[arg(long, value_name = "COMMAND")]
    start_broker_cmd: Option<String>,

    /// Brokers of the cluster.
    #[arg(long, default_value_t = 1)]
    brokers: u32,

    /// Longest wait for the group to drain once the load ended.
    #[arg(long, default_value_t = 300.0)]
    drain_timeout: f64,

    /// Where the members' logs go.
    #[arg(long, default_value = ".local/explore")]
    log_dir: PathBuf,

    /// Where the JSON report goes.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
}

impl ExploreArgs {
    fn validate(&self) -> Result<()> {
        self.mix.config().validate().map_err(|e| anyhow!(e))?;
        for (flag, value) in [
            ("--seconds", self.seconds),
            ("--rate", self.rate),
            ("--session-seconds", self.session_seconds),
            ("--drain-timeout", self.drain_timeout),
        ] {
            if !(value.is_finite() && value > 0.0) {
                bail!("{flag} must be above 0, not {value}");
            }
        }
        for (a, b) in [
            ("--backup-database-cmd", "--restore-database-cmd"),
            ("--cut-replica-cmd", "--failover-database-cmd"),
            ("--kill-broker-cmd", "--start-broker-cmd"),
        ] {
            if self.command(a).is_some() != self.command(b).is_some() {
                bail!("{a} and {b} go together");
            }
        }
        if self.brokers == 0 {
            bail!("--brokers must be at least 1");
        }
        Ok(())
    }

    fn command(&self, flag: &str) -> Option<&str> {
        match flag {
            "--restart-database-cmd" => self.restart_database_cmd.as_deref(),
            "--backup-database-cmd" => self.backup_database_cmd.as_deref(),
            "--restore-database-cmd" => self.restore_database_cmd.as_deref(),
            "--cut-replica-cmd" => self.cut_replica_cmd.as_deref(),
            "--failover-database-cmd" => self.failover_database_cmd.as_deref(),
            "--kill-broker-cmd" => self.kill_broker_cmd.as_deref(),
            "--start-broker-cmd" => self.start_broker_cmd.as_deref(),
            other => unreachable!("no command flag {other}"),
        }
    }

    fn offered(&self) -> Offered {
        Offered {
            restart_database: self.restart_database_cmd.is_some(),
            restore_database: self.restore_database_cmd.is_some(),
            failover_database: self.failover_database_cmd.is_some(),
            brokers: if self.kill_broker_cmd.is_some() {
                self.brokers
            } else {
                0
            },
            consumer_protocol: self.consumer_protocol,
            session_seconds: self.session_seconds,
        }
    }

    fn member_config(&self, schedule: &Schedule) -> Result<MemberConfig> {
        let binary = consumer_binary(self.consumer_bin.as_ref())?;
        let mut env = consumer_env(&self.consumer_env)?;
        // The consumer protocol's session is the broker's, which the
        // consumer then refuses to be given.
        match schedule.protocol {
            Protocol::Classic => env.push((
                "KAFKA_PROPERTY_SESSION_TIMEOUT_MS".to_owned(),
                format!("{}", (self.session_seconds * 1000.0) as u64),
            )),
            Protocol::Consumer => env.push(("GROUP_PROTOCOL".to_owned(), "consumer".to_owned())),
        }
        Ok(MemberConfig {
            binary,
            database_url: self.target.database_url.clone(),
            bootstrap_servers: self.target.bootstrap_servers.clone(),
            topic: self.target.topic.clone(),
            group: self
                .group
                .clone()
                .unwrap_or_else(|| format!("{}-explore", self.target.topic)),
            consumer_name: self.target.consumer_name.clone(),
            env,
            log_dir: self.log_dir.clone(),
        })
    }
}

/// One fault as it was injected.
struct Injected {
    /// Seconds from the start of the load.
    at: f64,
    what: String,
}

/// The members and what happened to them.
struct Group {
    members: Vec<Member>,
    /// Members that exited on their own and were started again.
    restarts: Vec<String>,
    /// Members that did not stop cleanly when asked: defects of their own.
    failed_stops: Vec<String>,
    /// A broker was killed and not started yet.
    broker_down: bool,
}

impl Group {
    /// Starts again every member that exited on its own.
    fn supervise(&mut self) -> Result<()> {
        for member in &mut self.members {
            if let Some(exit) = member.exited_unexpectedly() {
                eprintln!("  {exit}: started again, as its supervisor would");
                self.restarts.push(exit);
                member.start()?;
            }
        }
        Ok(())
    }

    /// Waits until `until`, supervising meanwhile.
    async fn wait_until(&mut self, until: Instant) -> Result<()> {
        loop {
            self.supervise()?;
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            tokio::time::sleep((until - now).min(SUPERVISE_EVERY)).await;
        }
    }
}

pub async fn explore(args: ExploreArgs) -> Result<bool> {
    args.validate()?;
    let schedule = Schedule::draw(args.seed, args.seconds, args.offered());
    if args.schedule_only {
        print!("{schedule}");
        return Ok(true);
    }
    eprint!("inbox-loadgen explore on {}: {schedule}", args.target.topic);
    let started = Instant::now();
    let mix = args.mix.config();
    let skus = mix.sku_names();
    let database = args.target.database(args.seconds, 0).await?;
    database.seed(&skus).await?;
    let (today, retention_days, on_hand) = database.model_inputs().await?;

    let config = args.member_config(&schedule)?;
    let mut group = Group {
        members: (0..schedule.members)
            .map(|i| {
                let instance = format!("m{i}");
                Member::new(
                    &config,
                    &format!("explore-{}-{i}", args.seed),
                    args.metrics_port + i as u16,
                    schedule.static_members.then_some(instance.as_str()),
                )
            })
            .collect(),
        restarts: Vec::new(),
        failed_stops: Vec::new(),
        broker_down: false,
    };
    for member in &mut group.members {
        member.start()?;
    }
    for member in &mut group.members {
        member.wait_ready().await?;
    }

    let producer = Producer::connect(&args.target.bootstrap_servers, &args.target.topic).await?;
    let mut generator = Generator::new(
        mix,
        StdRng::seed_from_u64(args.seed),
        format!("x{}", args.seed),
    );
    let mut manifest = Manifest::default();
    let quiet = Quiet::default();
    let (produced, injected) = tokio::join!(
        produce(
            &producer,
            &mut generator,
            &mut manifest,
            args.rate * args.seconds,
            args.rate,
            &quiet
        ),
        play(&args, &schedule, &mut group, &quiet)
    );
    let injected = injected?;
    produced?;
    producer.finish().await?;

    // The members stopped come back, then the group drains.
    for member in group.members.iter_mut().filter(|m| !m.is_running()) {
        member.start()?;
    }
    let progress = GroupProgress::new(
        &args.target.bootstrap_servers,
        &config.group,
        &args.target.topic,
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs_f64(args.drain_timeout);
    let ends = progress.end_offsets(deadline).await?;
    drain(&database, &progress, &ends, &mut group, deadline).await?;
    for member in &mut group.members {
        stop(member, &mut group.failed_stops).await;
    }

    // What the topic holds, through the model, against the database.
    let log = topic_log::read(
        &args.target.bootstrap_servers,
        &args.target.topic,
        &ends,
        Duration::from_secs(120),
    )
    .await?;
    let mut model = inbox_model::Model::new(today, retention_days, on_hand, None);
    for records in log.values() {
        model.apply_batch(&args.target.consumer_name, records);
    }
    let (found, twice) = inbox_model::database::tables(database.pool())
        .await
        .context("reading the tables back")?;
    let mut differences = twice;
    inbox_model::diff(model.tables(), &found, &mut differences);
    // A member that cannot be stopped is a defect of its own.
    differences.extend(group.failed_stops.iter().map(|s| format!("shutdown: {s}")));

    // What the members' logs say happened to them.
    let logs: String = group
        .members
        .iter()
        .map(|m| {
            std::fs::read_to_string(args.log_dir.join(format!("{}.log", m.name)))
                .unwrap_or_default()
        })
        .collect();
    let read_again = logs.matches("reading the partition again").count();
    differences.extend(
        logs.lines()
            .filter(|line| line.contains("panicked"))
            .map(|line| format!("a member panicked: {line}")),
    );

    let records: usize = log.values().map(Vec::len).sum();
    let tables = model.tables();
    println!(
        "seed {}: {} faults ({}), {} records ({} events applied, {} parked), \
         {} member restarts, {} partitions read again after the database went back, \
         {} differences, {:.0} s",
        args.seed,
        injected.len(),
        schedule
            .counts()
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        records,
        tables.ledger.len(),
        tables.parked.len(),
        group.restarts.len(),
        read_again,
        differences.len(),
        started.elapsed().as_secs_f64()
    );
    if !differences.is_empty() {
        println!(
            "DIVERGENCE: the database differs from the model; run it again with --seed {}",
            args.seed
        );
        print!("{schedule}");
        for line in differences.iter().take(PRINTED_DIFFERENCES) {
            println!("  {line}");
        }
        if differences.len() > PRINTED_DIFFERENCES {
            println!(
                "  … {} more in the report",
                differences.len() - PRINTED_DIFFERENCES
            );
        }
    }
    if let Some(path) = &args.report {
        let report = json!({
            "seed": args.seed,
            "topic": args.target.topic,
            "seconds": args.seconds,
            "rate": args.rate,
            "members": schedule.members,
            "static_members": schedule.static_members,
            "protocol": format!("{:?}", schedule.protocol).to_lowercase(),
            "faults": injected.iter().map(|i| json!({"at": i.at, "what": i.what})).collect::<Vec<_>>(),
            "fault_counts": schedule.counts().into_iter().collect::<BTreeMap<_, _>>(),
            "records": records,
            "events_sent": manifest.events_sent(),
            "applied": tables.ledger.len(),
            "parked": tables.parked.len(),
            "member_restarts": group.restarts,
            "read_again": read_again,
            "differences": differences,
            "seconds_taken": started.elapsed().as_secs_f64(),
        });
        output::write_json(path, &report)?;
    }
    Ok(differences.is_empty())
}

/// Until when the load holds off (a quiet spell of the schedule).
#[derive(Default, Clone)]
struct Quiet(Arc<Mutex<Option<Instant>>>);

impl Quiet {
    fn hold_off_until(&self, until: Instant) {
        *self.0.lock().expect("quiet lock") = Some(until);
    }

    fn now(&self) -> bool {
        self.0
            .lock()
            .expect("quiet lock")
            .is_some_and(|until| Instant::now() < until)
    }
}

/// `total` events at `rate` a second, none while the schedule keeps the
/// load quiet (the events due then are sent after it, at the rate).
async fn produce(
    producer: &Producer,
    generator: &mut Generator,
    manifest: &mut Manifest,
    total: f64,
    rate: f64,
    quiet: &Quiet,
) -> Result<()> {
    let total = total.round() as u64;
    let mut ticker = tokio::time::interval(Duration::from_millis(10));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut sent, mut loud, mut last) = (0u64, Duration::ZERO, Instant::now());
    while sent < total {
        ticker.tick().await;
        let now = Instant::now();
        if !quiet.now() {
            loud += now - last;
        }
        last = now;
        let due = ((loud.as_secs_f64() * rate) as u64).min(total);
        while sent < due {
            produce::send_next(producer, generator, manifest).await?;
            sent += 1;
        }
    }
    Ok(())
}

/// Plays the schedule while the load runs.
async fn play(
    args: &ExploreArgs,
    schedule: &Schedule,
    group: &mut Group,
    quiet: &Quiet,
) -> Result<Vec<Injected>> {
    let start = Instant::now();
    let mut injected = Vec::new();
    for step in &schedule.steps {
        group
            .wait_until(start + Duration::from_secs_f64(step.at))
            .await?;
        let at = start.elapsed().as_secs_f64();
        eprintln!("  {at:>6.1} s  {}", step.fault);
        inject(args, &step.fault, group, quiet)
            .await
            .with_context(|| format!("injecting {} at {at:.1} s", step.fault))?;
        injected.push(Injected {
            at,
            what: step.fault.to_string(),
        });
    }
    // A broker still down comes back while the load goes on: the
    // producer waits for it.
    if group.broker_down {
        shell(args.start_broker_cmd.as_deref()).await?;
        group.broker_down = false;
    }
    Ok(injected)
}

async fn inject(args: &ExploreArgs, fault: &Fault, group: &mut Group, quiet: &Quiet) -> Result<()> {
    match *fault {
        Fault::KillConsumer(m) => {
            let member = &mut group.members[m];
            // It may have exited on its own since the last look.
            if member.is_running() {
                member.kill().await?;
            }
            member.start()
        }
        Fault::StopConsumer(m) => {
            stop(&mut group.members[m], &mut group.failed_stops).await;
            Ok(())
        }
        Fault::StartConsumer(m) => {
            let member = &mut group.members[m];
            if member.is_running() {
                return Ok(());
            }
            member.start()
        }
        Fault::PauseConsumer(m, seconds) => {
            if !group.members[m].is_running() {
                return Ok(());
            }
            group.members[m].signal(libc::SIGSTOP)?;
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            group.members[m].signal(libc::SIGCONT)
        }
        Fault::RestartDatabase => shell(args.restart_database_cmd.as_deref()).await,
        Fault::BackupDatabase => shell(args.backup_database_cmd.as_deref()).await,
        Fault::RestoreDatabase => shell(args.restore_database_cmd.as_deref()).await,
        Fault::CutReplica => shell(args.cut_replica_cmd.as_deref()).await,
        Fault::FailoverDatabase => shell(args.failover_database_cmd.as_deref()).await,
        Fault::KillBroker(node) => {
            let command = args
                .kill_broker_cmd
                .as_deref()
                .map(|c| c.replace("{node}", &node.to_string()));
            shell(command.as_deref()).await?;
            group.broker_down = true;
            Ok(())
        }
        Fault::StartBroker => {
            shell(args.start_broker_cmd.as_deref()).await?;
            group.broker_down = false;
            Ok(())
        }
        Fault::Replay => {
            // docs/operations.md: stop the consumers, move the positions,
            // start them.
            for member in &mut group.members {
                stop(member, &mut group.failed_stops).await;
            }
            group.members[0].rewind_positions().await?;
            for member in &mut group.members {
                member.start()?;
            }
            Ok(())
        }
        Fault::Maintain => group.members[0].tool(&["maintain"]).await,
        Fault::Quiet(seconds) => {
            quiet.hold_off_until(Instant::now() + Duration::from_secs_f64(seconds));
            Ok(())
        }
    }
}

/// A process this young may not have its signal handler yet: SIGTERM then
/// ends it at once, which is no fault of its shutdown (nothing is in hand).
const STARTING: Duration = Duration::from_secs(1);

/// A graceful stop. One that does not end cleanly in time is a finding
/// (the member is then killed, and the run goes on), unless the process
/// was still starting (a member the supervisor had just started again).
async fn stop(member: &mut Member, failed_stops: &mut Vec<String>) {
    let starting = member.uptime().is_some_and(|uptime| uptime < STARTING);
    match member.stop().await {
        Ok(()) => {}
        Err(error) if starting && error.to_string().contains("signal: 15") => {
            eprintln!("  {error}: it was starting, before its signal handler")
        }
        Err(error) => {
            eprintln!("  FINDING: {error}");
            failed_stops.push(error.to_string());
        }
    }
}

/// Waits until the group committed `ends` and the database's positions
/// reached them, supervising the members meanwhile.
async fn drain(
    database: &Database,
    progress: &GroupProgress,
    ends: &[i64],
    group: &mut Group,
    deadline: Instant,
) -> Result<()> {
    loop {
        group.supervise()?;
        let committed = progress.committed(deadline).await?;
        let positions = database.positions().await;
        if let Ok(positions) = &positions {
            let applied = ends.iter().enumerate().all(|(p, &end)| {
                end == 0 || positions.get(&(p as i32)).is_some_and(|&next| next >= end)
            });
            if applied && crate::probes::group_progress::caught_up(&committed, ends) {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "not drained in time: end offsets {ends:?}, committed {committed:?}, \
                 database positions {positions:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
