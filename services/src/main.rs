//! `inbox-services`: the daemon work of `scripts/services.sh` on the shared
//! services of `.local/`, a PostgreSQL cluster on 127.0.0.1:5432 and a
//! Kafka node on 9092 (or three on 9092, 9094, 9096). The script keeps the
//! installs, Kafka's jars per version, the lock of up/down and the parsing
//! of its commands, and calls this:
//!
//! ```text
//! inbox-services postgres up | down | status | restart | prune
//! inbox-services kafka up BROKERS VERSION LIBS [--fresh] | down | status | prune
//!                      | topic NAME PARTITIONS | kill NODE_ID | bootstrap | tool CLASS ARGS...
//! inbox-services pair up | restart | cut | failover | backup | restore | down
//! ```
//!
//! `pair` is the whole of `scripts/db-pair.sh` (the database pair of the
//! fault runs, in `.local/pair`): `up` prints the endpoint's URL on stdout
//! and nothing else; every command logs on stderr.
//!
//! `SERVICES_KAFKA_DIR` and `SERVICES_KAFKA_PORT` move the Kafka elsewhere
//! (`make compat` runs each version beside the local broker).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use inbox_services::kafka::{self, Launch, Node};
use inbox_services::pair::Pair;
use inbox_services::postgres::Cluster;
use inbox_services::toxiproxy;
use inbox_services::{port_open, read, remove, repo, signal, tail, wait_until, write, Result};

macro_rules! log {
    ($($arg:tt)*) => { eprintln!("[services] {}", format_args!($($arg)*)) };
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let outcome = match args.as_slice() {
        ["postgres", command] => postgres(&shared_cluster(), command),
        ["kafka", command @ ..] => Kafka::local().and_then(|mut kafka| kafka.run(command)),
        ["pair", command @ ..] => return pair(command),
        _ => Err(
            "usage: inbox-services postgres COMMAND | kafka COMMAND | pair COMMAND \
             (see scripts/services.sh, scripts/db-pair.sh)"
                .into(),
        ),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            log!("ERROR: {error}");
            ExitCode::FAILURE
        }
    }
}

fn local() -> PathBuf {
    repo().join(".local")
}

/// Who listens on a TCP port (for error messages).
fn port_owner(port: u16) -> String {
    let ss = Command::new("ss")
        .args(["-Hltnp", &format!("sport = :{port}")])
        .output();
    let text = ss.map(|out| String::from_utf8_lossy(&out.stdout).into_owned());
    text.unwrap_or_default()
        .lines()
        .take(3)
        .collect::<Vec<_>>()
        .join("\n")
}

const NOT_RUNNING: &str = "is not running (run: scripts/services.sh up)";

// The database pair -------------------------------------------------------

/// Runs a command of `scripts/db-pair.sh`: 2 when there is no such command.
fn pair(command: &[&str]) -> ExitCode {
    let pair = Pair::new(local().join("pair"), toxiproxy::Api::from_env());
    let outcome = match command {
        ["up"] => pair.up().map(|url| println!("{url}")),
        ["restart"] => pair.restart(),
        ["cut"] => pair.cut(),
        ["failover"] => pair.failover(),
        ["backup"] => pair.take_backup(),
        ["restore"] => pair.restore(),
        ["down"] => {
            pair.down();
            Ok(())
        }
        _ => {
            eprintln!(
                "usage: scripts/db-pair.sh up | restart | cut | failover | backup | restore | down"
            );
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("[db-pair] {error}");
            ExitCode::FAILURE
        }
    }
}

// PostgreSQL ---------------------------------------------------------------

const PG_PORT: u16 = 5432;
/// The databases tests and benchmark runs create for themselves (each a
/// fresh name) and that a crash or an interrupted run leaves behind;
/// `_sqlx_test_*`: the store's in-process tests (#[sqlx::test]).
const RUN_DATABASES: &str =
    "^((inbox_test|never_migrated|lt|chaos|bench_ceiling|bench_floor)_|_sqlx_test_)";
/// The role and database of the default DATABASE_URL (docs/design.md#configuration).
/// CREATEDB: tests create a database each; CREATEROLE: migrations create a
/// least-privilege role; pg_checkpoint: a benchmark settles the cluster
/// between two runs it compares (scripts/bench-scale.sh).
const BOOTSTRAP: &str = "DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'inventory') THEN
        CREATE ROLE inventory LOGIN CREATEDB CREATEROLE PASSWORD 'inventory';
    ELSE
        ALTER ROLE inventory LOGIN CREATEDB CREATEROLE PASSWORD 'inventory';
    END IF;
END $$;
SELECT 'CREATE DATABASE inventory OWNER inventory'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'inventory')
\\gexec
ALTER DATABASE inventory OWNER TO inventory;
GRANT pg_checkpoint TO inventory;
";

fn shared_cluster() -> Cluster {
    let dir = local().join("pg");
    // A unix socket path must fit in 107 bytes; deep checkouts use /tmp.
    let mut socket = dir.join("run");
    if socket.as_os_str().len() > 90 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        repo().hash(&mut hasher);
        socket = format!("/tmp/inventory-inbox-pg-{:012x}", hasher.finish() >> 16).into();
    }
    let (data, log) = (dir.join("data"), dir.join("postgres.log"));
    Cluster {
        data,
        socket,
        port: PG_PORT,
        log,
    }
}

fn postgres(pg: &Cluster, command: &str) -> Result<bool> {
    match (command, pg.pid()) {
        ("up", _) => postgres_up(pg)?,
        ("down", Some(pid)) => {
            log!("stopping postgres (pid {pid})");
            pg.stop("fast")?;
        }
        ("down", None) => {
            log!("postgres is not running");
            remove(&pg.data.join("postmaster.pid"));
        }
        ("status", pid) => {
            let state = match pid {
                Some(pid) if pg.ready() => {
                    let data = pg.data.display();
                    format!("up (pid {pid}, 127.0.0.1:{PG_PORT}, data {data})")
                }
                Some(pid) => format!("starting or not answering (pid {pid})"),
                None => "down".into(),
            };
            println!("postgres: {state}");
            return Ok(state.starts_with("up"));
        }
        (_, None) if ["restart", "prune"].contains(&command) => {
            return Err(format!("postgres {NOT_RUNNING}"))
        }
        ("restart", _) => {
            log!("restarting postgres (fast: open sessions are terminated)");
            pg.restart()?;
            pg.wait_ready()?;
        }
        ("prune", _) => {
            let runs = format!("FROM pg_database WHERE datname ~ '{RUN_DATABASES}'");
            let count = pg.psql("postgres", &format!("SELECT count(*) {runs}"))?;
            let drop = "SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', datname)";
            pg.psql("postgres", &format!("{drop} {runs}\n\\gexec\n"))?;
            log!("dropped {count} run databases");
        }
        _ => return Err(format!("postgres: unknown command {command}")),
    }
    Ok(true)
}

fn postgres_up(pg: &Cluster) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = pg.data.parent().expect("data is in .local/pg");
    for (path, mode) in [(dir, 0o750), (pg.socket.as_path(), 0o755)] {
        std::fs::create_dir_all(path)
            .and_then(|()| std::fs::set_permissions(path, PermissionsExt::from_mode(mode)))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    inbox_services::chown_to_server_user(&[dir.to_owned(), pg.socket.clone()])?;
    make_reachable(&local())?;
    if !pg.exists() {
        log!("initdb {}", pg.data.display());
        remove(&pg.data);
        pg.initdb(&["--auth-local=trust", "--auth-host=scram-sha-256"])?;
    }
    let socket = pg.socket.display();
    let own = format!(
        "listen_addresses = '127.0.0.1'\nport = {PG_PORT}\nunix_socket_directories = '{socket}'"
    );
    pg.configure(&own, Some(&inbox_services::template("pg_hba.conf")?))?;
    if let Some(pid) = pg.pid() {
        log!("postgres already running (pid {pid}); reloading its configuration");
        pg.reload()?;
    } else {
        if pg.data.join("postmaster.pid").exists() {
            log!("removing stale postmaster.pid (its process is gone)");
            remove(&pg.data.join("postmaster.pid"));
        }
        if port_open(PG_PORT) {
            return Err(format!(
                "port 127.0.0.1:{PG_PORT} is already taken by another process, not by our cluster in {}:\n{}\n\
                 (the Debian cluster? see pg_lsclusters; stop it with: pg_ctlcluster 15 main stop)",
                pg.data.display(),
                port_owner(PG_PORT)
            ));
        }
        log!(
            "starting postgres ({}, log {})",
            pg.data.display(),
            pg.log.display()
        );
        pg.start()?;
    }
    pg.wait_ready()?;
    // After a reload, settings that only a restart applies (shared_buffers,
    // max_connections...) are pending: restart for them.
    let pending = "SELECT string_agg(name, ', ') FROM pg_settings WHERE pending_restart";
    let pending = pg.psql("postgres", pending)?;
    if !pending.is_empty() {
        log!("restarting postgres to apply {pending}");
        pg.restart()?;
    }
    pg.psql("postgres", BOOTSTRAP)?;
    log!("postgres ready on 127.0.0.1:{PG_PORT} (DATABASE_URL=postgres://inventory:inventory@127.0.0.1:{PG_PORT}/inventory)");
    Ok(())
}

/// The postgres user must reach .local/pg: every directory above it must
/// be searchable by others (a checkout under /root would not be).
fn make_reachable(dir: &Path) -> Result<()> {
    for dir in dir.ancestors() {
        let test = inbox_services::as_server_user("test")
            .arg("-x")
            .arg(dir)
            .status();
        if !test.is_ok_and(|s| s.success()) {
            log!(
                "making {} traversable for the postgres user (chmod o+x)",
                dir.display()
            );
            inbox_services::run(Command::new("chmod").arg("o+x").arg(dir))?;
        }
    }
    Ok(())
}

// Kafka --------------------------------------------------------------------

/// The topics of the service: name and partitions.
const TOPICS: [(&str, u32); 2] = [("orders.placed.v1", 12), ("orders.placed.v1.dlq", 12)];
/// The topics tests and runs create for themselves (TopicCommand's regex).
const RUN_TOPICS: &str = "(orders_test|lt|chaos)_.*";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Start-up failures that mean a single node's data dir is unusable
/// (wiping it is fine for a local dev broker).
const BAD_DATA: [&str; 7] = [
    "InconsistentClusterIdException",
    "meta.properties",
    "CorruptRecordException",
    "KafkaStorageException",
    "No readable meta",
    "not formatted",
    "Invalid cluster.id",
];
/// The shared broker's own settings, after the template's.
const OWN_SETTINGS: &str = "
# The local broker's own.
num.partitions=12
# Per topic: the cluster's topics ask for 2 (scripts/services.sh topic), the
# tests' unreplicated ones cannot.
min.insync.replicas=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
num.network.threads=3
num.io.threads=4
num.recovery.threads.per.data.dir=2
";
/// Bounds for the tools' admin client, so that a broker that is not up yet
/// makes TopicCommand fail fast instead of hanging for 60 s.
const ADMIN_SETTINGS: &str = "request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n";
const JVM_ARGS: [&str; 6] = [
    "-Xms512m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
];

/// The shared Kafka: its directory, and its nodes (as many as `up` made
/// last): node N listens on PORT + 2(N-1), its controller one port above,
/// in the directory itself (node 1) or in node-N/.
struct Kafka {
    dir: PathBuf,
    base_port: u16,
    nodes: Vec<Node>,
}

impl Kafka {
    fn local() -> Result<Kafka> {
        let dir =
            std::env::var_os("SERVICES_KAFKA_DIR").map_or(local().join("kafka"), PathBuf::from);
        let port = std::env::var("SERVICES_KAFKA_PORT").unwrap_or("9092".into());
        let base_port = port
            .parse()
            .map_err(|_| format!("SERVICES_KAFKA_PORT: {port}"))?;
        let size = read(&dir.join("brokers"))
            .ok()
            .and_then(|n| n.trim().parse().ok());
        let mut kafka = Kafka {
            dir,
            base_port,
            nodes: Vec::new(),
        };
        kafka.resize_to(size.unwrap_or(1));
        Ok(kafka)
    }

    fn resize_to(&mut self, size: u16) {
        let node = |id: u16| Node {
            id: id.into(),
            port: self.base_port + 2 * (id - 1),
            controller_port: self.base_port + 2 * (id - 1) + 1,
            dir: if id == 1 {
                self.dir.clone()
            } else {
                self.dir.join(format!("node-{id}"))
            },
        };
        self.nodes = (1..=size).map(node).collect();
    }

    fn bootstrap(&self) -> String {
        let servers: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        servers.join(",")
    }

    /// The jars of the version that runs.
    fn libs(&self) -> PathBuf {
        self.dir.join("libs")
    }

    /// The version the data is of (data older than the record is 4.1.2's).
    fn version(&self) -> String {
        read(&self.dir.join("version")).map_or("4.1.2".into(), |v| v.trim().to_owned())
    }

    fn running(&self) -> bool {
        self.nodes.iter().any(|node| node.pid().is_some())
    }

    fn run(&mut self, command: &[&str]) -> Result<bool> {
        if matches!(command, ["topic" | "kill" | "prune", ..]) && !self.running() {
            return Err(format!("kafka {NOT_RUNNING}"));
        }
        match command {
            ["up", brokers, version, libs, fresh @ ..] => {
                let brokers = brokers.parse().ok().filter(|n| [1, 3].contains(n));
                let brokers = brokers.ok_or("--brokers (KAFKA_BROKERS) must be 1 or 3")?;
                self.up(brokers, version, Path::new(libs), fresh == ["--fresh"])?;
            }
            ["down"] => self.stop_all()?,
            ["status"] => return Ok(self.status()),
            ["topic", name, partitions] => self.create_topic(name, partitions)?,
            ["kill", id] => self.kill(id)?,
            ["prune"] => {
                if self.topics(&["--list"])?.lines().any(|topic| {
                    ["orders_test_", "lt_", "chaos_"]
                        .iter()
                        .any(|run| topic.starts_with(run))
                }) {
                    self.topics(&["--delete", "--topic", RUN_TOPICS])?;
                }
                log!("deleted the run topics");
            }
            ["bootstrap"] => println!("{}", self.bootstrap()),
            ["tool", args @ ..] => print!("{}", kafka::run_tool(&self.libs(), args)?),
            _ => return Err(format!("kafka: unknown command {command:?}")),
        }
        Ok(true)
    }

    fn up(&mut self, brokers: u16, version: &str, libs: &Path, fresh: bool) -> Result<()> {
        self.use_data_of(version, brokers, libs, fresh)?;
        write(&self.dir.join("admin.properties"), ADMIN_SETTINGS)?;
        for node in &self.nodes {
            let header = format!(
                "# Written by scripts/services.sh on every `up`; edit scripts/services/kafka-server.properties.\n\
                 # Node {} of {} KRaft node(s), each broker and controller.\n",
                node.id,
                self.nodes.len()
            );
            let settings = header + &node.settings(&self.nodes, 12, OWN_SETTINGS)?;
            if node.write_config(&settings)? {
                if let Some(pid) = node.pid() {
                    log!(
                        "server.properties of node {} changed: restarting it",
                        node.id
                    );
                    stop(node, pid)?;
                }
            }
        }
        let topics = self.start(true)?;
        for (name, partitions) in TOPICS {
            if !topics.lines().any(|topic| topic == name) {
                log!("creating topic {name} ({partitions} partitions)");
                self.create_topic(name, &partitions.to_string())?;
            }
        }
        let pids: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "{}:{}",
                    n.id,
                    n.pid().map_or("down".into(), |p| p.to_string())
                )
            })
            .collect();
        log!(
            "kafka {version} ready on {} (node:pid {})",
            self.bootstrap(),
            pids.join(" ")
        );
        Ok(())
    }

    /// The data is of one version and one node count: another version
    /// (each keeps to the formats it wrote itself) or count (another
    /// cluster) wipes it, as `fresh` does, and the topics are created
    /// again. `libs` links to the version's jars (a broker running on
    /// others is stopped first).
    fn use_data_of(&mut self, version: &str, size: u16, libs: &Path, fresh: bool) -> Result<()> {
        let (had, had_size) = (self.version(), self.nodes.len());
        if fresh || had != version || had_size != usize::from(size) {
            if !fresh && (self.running() || self.dir.join("data").exists()) {
                log!("kafka goes from {had} on {had_size} node(s) to {version} on {size}: wiping its local data (topics are created again)");
            }
            self.stop_all()?;
            remove(&self.dir.join("data"));
            for id in 2..=3 {
                remove(&self.dir.join(format!("node-{id}")));
            }
        }
        if std::fs::read_link(self.libs()).ok().as_deref() != Some(libs) {
            if self.running() {
                log!("kafka's jars changed (scripts/kafka/pom.xml): restarting it on the new ones");
                self.stop_all()?;
            }
            remove(&self.libs());
            std::fs::create_dir_all(&self.dir)
                .and_then(|()| std::os::unix::fs::symlink(libs, self.libs()))
                .map_err(|e| format!("link {}: {e}", self.libs().display()))?;
        }
        write(&self.dir.join("version"), &format!("{version}\n"))?;
        write(&self.dir.join("brokers"), &format!("{size}\n"))?;
        self.resize_to(size);
        Ok(())
    }

    /// Starts every node that is not running, then waits for each (the
    /// nodes of a cluster start together: none answers before a quorum of
    /// controllers is up); the topics node 1 lists. With `retry`, a single
    /// node that fails on its data dir is wiped and formatted anew once.
    fn start(&self, retry: bool) -> Result<String> {
        let libs = self.libs().canonicalize();
        let libs = libs.map_err(|e| format!("{}: {e}", self.libs().display()))?;
        let logged = std::fs::metadata(self.nodes[0].server_log()).map_or(0, |m| m.len());
        for node in &self.nodes {
            self.launch(node, &libs)?;
        }
        let mut topics = String::new();
        for node in &self.nodes {
            match self.wait_ready(node)? {
                Some(list) if node.id == 1 => topics = list,
                Some(_) => {}
                None => return self.exited(node, retry.then_some(logged)),
            }
        }
        Ok(topics)
    }

    /// A node that exited during start-up; `logged`: the length of its log
    /// before, when it may be formatted anew and started once more.
    fn exited(&self, node: &Node, logged: Option<u64>) -> Result<String> {
        remove(&node.pid_file());
        let server_log = read(&node.server_log()).unwrap_or_default();
        let since = server_log
            .get(logged.unwrap_or(0) as usize..)
            .unwrap_or(&server_log);
        let said = format!("{since}{}", read(&node.stdout_log()).unwrap_or_default());
        if logged.is_some()
            && self.nodes.len() == 1
            && BAD_DATA.iter().any(|bad| said.contains(bad))
        {
            eprintln!("{}", tail(&node.server_log(), 15));
            log!(
                "kafka failed on its data dir; wiping {} and formatting anew",
                node.data().display()
            );
            remove(&node.data());
            return self.start(false);
        }
        eprintln!(
            "{}\n{}",
            tail(&node.stdout_log(), 20),
            tail(&node.server_log(), 40)
        );
        Err(format!("kafka node {} exited during start-up", node.id))
    }

    /// Launches a node unless it runs, formatting its storage first unless
    /// it has a valid meta.properties (else it is wiped), for the cluster
    /// id another node has, or a new one.
    fn launch(&self, node: &Node, libs: &Path) -> Result<()> {
        if let Some(pid) = node.pid() {
            match self.nodes.len() {
                1 => log!("kafka already running (pid {pid})"),
                _ => log!("kafka node {} already running (pid {pid})", node.id),
            }
            return Ok(());
        }
        if node.pid_file().exists() {
            log!(
                "removing stale {} (its process is gone)",
                node.pid_file().display()
            );
            remove(&node.pid_file());
        }
        for port in [node.port, node.controller_port] {
            if port_open(port) {
                return Err(format!(
                    "port 127.0.0.1:{port} is already taken by another process, not by our broker:\n{}",
                    port_owner(port)
                ));
            }
        }
        if node.cluster_id().is_none() {
            if node.data().exists() {
                log!(
                    "wiping {} (no valid meta.properties)",
                    node.data().display()
                );
                remove(&node.data());
            }
            let id = self.nodes.iter().find_map(Node::cluster_id);
            let id = id.map_or_else(kafka::new_cluster_id, Ok)?;
            log!(
                "formatting Kafka storage of node {} (cluster id {id})",
                node.id
            );
            kafka::finish(node.format(&self.libs(), &id, self.nodes.len(), &[])?, node)?;
        }
        log!(
            "starting kafka node {} (log {})",
            node.id,
            node.server_log().display()
        );
        write(&node.stdout_log(), "")?;
        let jvm_args = JVM_ARGS.map(String::from).to_vec();
        let launch = Launch {
            jvm_args,
            detach: true,
            dies_with_thread: false,
        };
        node.launch(libs, &launch).map(drop)
    }

    /// Waits until the node answers TopicCommand --list: its topics, or
    /// None when its process exited.
    fn wait_ready(&self, node: &Node) -> Result<Option<String>> {
        let mut topics = None;
        let waited = wait_until(READY_TIMEOUT, "kafka did not answer", || {
            node.pid().ok_or("exited")?;
            // Polling the port costs nothing; a JVM launch costs 2-3 s.
            topics = port_open(node.port)
                .then(|| self.topics(&["--list"]).ok())
                .flatten();
            Ok(topics.is_some())
        });
        match waited {
            Ok(()) => Ok(topics),
            Err(_) if node.pid().is_none() => Ok(None),
            Err(e) => {
                eprintln!(
                    "{}\n{}",
                    tail(&node.stdout_log(), 20),
                    tail(&node.server_log(), 40)
                );
                Err(format!(
                    "{e} on {} (pid {:?})",
                    self.bootstrap(),
                    node.pid()
                ))
            }
        }
    }

    fn topics(&self, args: &[&str]) -> Result<String> {
        let bootstrap = self.bootstrap();
        let admin = self.dir.join("admin.properties").display().to_string();
        let mut command = vec!["org.apache.kafka.tools.TopicCommand", "--bootstrap-server"];
        command.extend([bootstrap.as_str(), "--command-config", &admin]);
        kafka::run_tool(&self.libs(), &[&command[..], args].concat())
    }

    /// Creates a topic unless it exists, replicated to every node.
    fn create_topic(&self, name: &str, partitions: &str) -> Result<()> {
        let replicas = self.nodes.len().to_string();
        let mut args = vec!["--create", "--if-not-exists", "--topic", name];
        args.extend([
            "--partitions",
            partitions,
            "--replication-factor",
            &replicas,
        ]);
        if self.nodes.len() > 1 {
            args.extend(["--config", "min.insync.replicas=2"]);
        }
        self.topics(&args).map(drop)
    }

    /// Every node, the last first (node 1, which the tools talk to, stays longest).
    fn stop_all(&self) -> Result<()> {
        for node in self.nodes.iter().rev() {
            match node.pid() {
                Some(pid) => {
                    log!("stopping kafka node {} (pid {pid})", node.id);
                    stop(node, pid)?;
                }
                None => {
                    log!("kafka is not running");
                    remove(&node.pid_file());
                }
            }
        }
        Ok(())
    }

    fn status(&self) -> bool {
        let version = self.version();
        let mut all_up = true;
        for node in &self.nodes {
            let name = match self.nodes.len() {
                1 => "kafka:".to_owned(),
                _ => format!("kafka-{}:", node.id),
            };
            let state = match node.pid() {
                Some(pid) if port_open(node.port) => {
                    let (port, data) = (node.port, node.data());
                    format!(
                        "up (Kafka {version}, pid {pid}, 127.0.0.1:{port}, data {})",
                        data.display()
                    )
                }
                Some(pid) => format!("starting or not answering (pid {pid})"),
                None => "down".into(),
            };
            all_up &= state.starts_with("up");
            println!("{name:<10}{state}");
        }
        all_up
    }

    /// kill -9 of a node, no shutdown of any kind; prints its id.
    fn kill(&self, id: &str) -> Result<()> {
        let node = id
            .parse::<usize>()
            .ok()
            .and_then(|id| self.nodes.get(id.checked_sub(1)?));
        let node = node.ok_or(format!(
            "kill-kafka: '{id}' is not a node of this cluster (1..{}, leader:TOPIC, coordinator:GROUP)",
            self.nodes.len()
        ))?;
        let pid = node.pid().ok_or(format!("kafka node {id} {NOT_RUNNING}"))?;
        log!("killing kafka node {id} with -9 (pid {pid})");
        signal(pid, libc::SIGKILL);
        // Gone, or a zombie (no cmdline) while nobody reaps it.
        wait_until(STOP_TIMEOUT, "kafka did not die", || {
            Ok(node.pid().is_none())
        })?;
        remove(&node.pid_file());
        println!("{id}");
        Ok(())
    }
}

/// SIGTERM, then SIGKILL after STOP_TIMEOUT; returns once it is gone.
fn stop(node: &Node, pid: i32) -> Result<()> {
    signal(pid, libc::SIGTERM);
    if wait_until(STOP_TIMEOUT, "", || Ok(!signal(pid, 0))).is_err() {
        log!(
            "kafka did not stop within {}s; killing it",
            STOP_TIMEOUT.as_secs()
        );
        signal(pid, libc::SIGKILL);
    }
    wait_until(STOP_TIMEOUT, "kafka did not die", || Ok(!signal(pid, 0)))?;
    remove(&node.pid_file());
    Ok(())
}
