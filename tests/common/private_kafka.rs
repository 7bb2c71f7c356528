//! Apache Kafka of one test's own, for tests that kill brokers: the shared
//! broker on 9092 serves every other test running in parallel and must never
//! go down.
//!
//! It is the same Kafka as the shared one, from the same launcher
//! (`inbox_services::kafka`) and jars (those `scripts/services.sh up`
//! fetched into `.local/kafka/libs`): one KRaft node that is broker and
//! controller (`start`), or a cluster of such nodes (`cluster`) with topics
//! replicated to every node and `min.insync.replicas=2`, as production runs
//! it. Each node has two free loopback ports and its own directory under a
//! fresh one. Dropping it kills every node and removes the directory.
//! Anything that keeps it from starting FAILS the test, it never skips.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use inbox_services::kafka::{self, Launch, Node};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::metadata::Metadata;
use uuid::Uuid;

use super::{create_topic_replicated, free_port, unique};

/// Longest wait for a node to answer after a (re)start.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Partitions of `__consumer_offsets`: few, so that a coordinator loads fast.
const OFFSETS_PARTITIONS: i32 = 3;

/// A private broker or cluster.
pub struct PrivateKafka {
    /// Holds a directory per node (`node-N/`); removed on drop.
    dir: PathBuf,
    nodes: Vec<Node>,
    /// The JVM of each running node, by position in `nodes`.
    processes: Vec<Option<Child>>,
    /// What the test adds to the project's node settings.
    setup: Setup,
}

/// What a test adds to a private node: settings, listeners besides
/// PLAINTEXT (on `bootstrap()`) and CONTROLLER, arguments of the storage
/// format (`--add-scram ...`) and of the JVM (`-Dname=value`).
#[derive(Debug, Default, Clone)]
pub struct Setup {
    /// Broker settings, after every other line.
    pub settings: Vec<(String, String)>,
    /// `(name, security protocol, port)` of each listener more (one node
    /// only: the ports are the test's).
    pub listeners: Vec<(String, String, u16)>,
    pub format_args: Vec<String>,
    pub jvm_args: Vec<String>,
    /// The node is killed when the thread that started it ends: a node
    /// shared by the tests of a binary, started from a thread that lives as
    /// long as the binary, dies with it even when the binary is killed.
    pub dies_with_thread: bool,
}

/// What the launcher said when it failed: the test fails with it.
fn must<T>(outcome: inbox_services::Result<T>) -> T {
    outcome.unwrap_or_else(|error| panic!("private Kafka: {error}"))
}

impl PrivateKafka {
    /// One node that is the whole cluster: replication 1.
    pub fn start() -> PrivateKafka {
        PrivateKafka::cluster(1)
    }

    /// One node with broker settings of the test's own (`key`, `value`).
    pub fn start_with(settings: &[(&str, &str)]) -> PrivateKafka {
        PrivateKafka::build(
            1,
            Setup {
                settings: settings
                    .iter()
                    .map(|(key, value)| (key.to_string(), value.to_string()))
                    .collect(),
                ..Setup::default()
            },
        )
    }

    /// One node with the test's own additions.
    pub fn start_setup(setup: Setup) -> PrivateKafka {
        PrivateKafka::build(1, setup)
    }

    /// `size` nodes, each broker and controller (more than one: a static
    /// quorum of all of them); topics get replication `size` and `min.insync.replicas` 2 (1
    /// for a single node). Returns when every node serves metadata.
    pub fn cluster(size: i32) -> PrivateKafka {
        PrivateKafka::build(size, Setup::default())
    }

    fn build(size: i32, setup: Setup) -> PrivateKafka {
        let libs = libs_dir();
        assert!(
            libs.join(".complete").exists(),
            "Kafka jars not found in {}: run `scripts/services.sh up` (it fetches them)",
            libs.display()
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("inbox-kafka-{}", Uuid::new_v4().simple()));
        let nodes: Vec<Node> = (1..=size as u32)
            .map(|id| Node {
                id,
                port: free_port(),
                controller_port: free_port(),
                dir: dir.join(format!("node-{id}")),
            })
            .collect();
        let processes = nodes.iter().map(|_| None).collect();
        let mut kafka = PrivateKafka {
            dir,
            nodes,
            processes,
            setup,
        };
        let cluster_id = must(kafka::new_cluster_id());
        for node in &kafka.nodes {
            must(node.write_config(&kafka.settings(node)));
        }
        // Each format is a JVM of its own: run them side by side.
        let formats: Vec<_> = kafka
            .nodes
            .iter()
            .map(|node| {
                let format = node.format(
                    &libs,
                    &cluster_id,
                    kafka.nodes.len(),
                    &kafka.setup.format_args,
                );
                must(format)
            })
            .collect();
        for (node, format) in kafka.nodes.iter().zip(formats) {
            must(kafka::finish(format, node));
        }
        for id in kafka.ids() {
            kafka.spawn(id);
        }
        kafka.wait_ready();
        kafka
    }

    /// The node ids, 1..=size.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|node| node.id as i32).collect()
    }

    /// The bootstrap servers: every node.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Crash of the single node: see `kill_node`.
    pub fn kill(&mut self) {
        self.kill_node(1);
    }

    /// Starts the single node again: see `start_node`.
    pub fn start_again(&mut self) {
        self.start_node(1);
    }

    /// Crash: SIGKILL, no shutdown of any kind, then reap the process.
    pub fn kill_node(&mut self, id: i32) {
        let mut process = self.processes[id as usize - 1]
            .take()
            .expect("the node is running");
        process.kill().expect("kill -9 the node");
        let status = process.wait().expect("reap the node");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "node {id} was not killed by SIGKILL: {status:?}"
        );
    }

    /// A controlled shutdown (SIGTERM): the node hands its leaderships over
    /// before it exits. Waits for the exit.
    pub fn stop_node(&mut self, id: i32) {
        let mut process = self.processes[id as usize - 1]
            .take()
            .expect("the node is running");
        // SAFETY: kill(2) on the pid of a child this struct still owns.
        unsafe { libc::kill(process.id() as i32, libc::SIGTERM) };
        let status = process.wait().expect("reap the node");
        assert!(
            status.success() || status.code() == Some(143),
            "node {id} did not shut down cleanly: {status:?}\n{}",
            self.log_text()
        );
    }

    /// Starts a node again on its existing data (after a kill it recovers
    /// its logs) and waits until the cluster serves metadata with every
    /// running node and a leader for every partition.
    pub fn start_node(&mut self, id: i32) {
        self.spawn(id);
        self.wait_ready();
    }

    /// Creates a topic replicated to every node.
    pub async fn topic(&self, partitions: i32) -> String {
        let replicas = self.nodes.len() as i32;
        let min_insync = replicas.min(2).to_string();
        create_topic_replicated(
            &self.bootstrap(),
            "orders_private",
            partitions,
            replicas,
            &[("min.insync.replicas", min_insync.as_str())],
        )
        .await
    }

    /// The leader node of each partition of `topic` (-1 while it has none).
    pub fn leaders(&self, topic: &str) -> BTreeMap<i32, i32> {
        let metadata = self.metadata(Some(topic));
        metadata.topics()[0]
            .partitions()
            .iter()
            .map(|partition| (partition.id(), partition.leader()))
            .collect()
    }

    /// The node that leads most partitions of `topic`.
    pub fn busiest_leader(&self, topic: &str) -> i32 {
        let mut led: BTreeMap<i32, usize> = BTreeMap::new();
        for leader in self.leaders(topic).into_values() {
            *led.entry(leader).or_default() += 1;
        }
        led.into_iter()
            .max_by_key(|(_, count)| *count)
            .map(|(node, _)| node)
            .expect("the topic has partitions")
    }

    /// The group coordinator of `group`: the leader of its partition of
    /// `__consumer_offsets` (Kafka picks it by the group id's Java hash).
    pub fn coordinator(&self, group: &str) -> i32 {
        let partition = offsets_partition(group, OFFSETS_PARTITIONS);
        let metadata = self.metadata(Some("__consumer_offsets"));
        let offsets = &metadata.topics()[0];
        assert!(
            offsets.error().is_none(),
            "__consumer_offsets has no metadata yet: {:?}",
            offsets.error()
        );
        offsets
            .partitions()
            .iter()
            .find(|p| p.id() == partition)
            .map(|p| p.leader())
            .expect("the group's offsets partition")
    }

    /// Waits until every partition of `topic` and of `__consumer_offsets`
    /// has all its replicas in sync (after a node came back), so that the
    /// next node can go without taking the last in-sync copy with it.
    pub fn wait_in_sync(&self, topic: &str) {
        let replicas = self.nodes.len();
        self.must_wait(inbox_services::wait_until(
            READY_TIMEOUT,
            "replicas not back in sync",
            || {
                let metadata = self.metadata(None);
                let mut partitions = metadata
                    .topics()
                    .iter()
                    .filter(|t| t.name() == topic || t.name() == "__consumer_offsets")
                    .flat_map(|t| t.partitions());
                Ok(partitions.all(|p| p.leader() >= 0 && p.isr().len() == replicas))
            },
        ));
    }

    /// Fails the test, with the nodes' logs, when a wait failed.
    fn must_wait(&self, waited: inbox_services::Result<()>) {
        waited.unwrap_or_else(|error| panic!("{error}:\n{}", self.log_text()));
    }

    /// The nodes' own logs, for failure messages.
    pub fn log_text(&self) -> String {
        self.nodes.iter().map(Node::log_text).collect()
    }

    fn metadata(&self, topic: Option<&str>) -> Metadata {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .create()
            .expect("metadata client");
        client
            .fetch_metadata(topic, Duration::from_secs(10))
            .expect("cluster metadata")
    }

    /// The project's node settings, then a private node's own and the
    /// setup's (a later line wins).
    fn settings(&self, node: &Node) -> String {
        let min_insync = self.nodes.len().min(2);
        let own = format!(
            "\n# A private node's own: replicated topics need two copies, few\n\
             # threads on two cores.\n\
             min.insync.replicas={min_insync}\n\
             num.network.threads=2\n\
             num.io.threads=2\n\
             num.replica.fetchers=1\n"
        ) + &self.listener_lines(node.port, node.controller_port)
            + &self
                .setup
                .settings
                .iter()
                .map(|(key, value)| format!("{key}={value}\n"))
                .collect::<String>();
        must(node.settings(&self.nodes, OFFSETS_PARTITIONS as u32, &own))
    }

    /// The lines that add the setup's listeners to PLAINTEXT and CONTROLLER.
    fn listener_lines(&self, port: u16, controller: u16) -> String {
        let listeners = &self.setup.listeners;
        if listeners.is_empty() {
            return String::new();
        }
        let at = |(name, _, port): &(String, String, u16)| format!("{name}://127.0.0.1:{port}");
        let more = listeners.iter().map(at).collect::<Vec<_>>().join(",");
        let protocols = listeners
            .iter()
            .map(|(name, protocol, _)| format!("{name}:{protocol}"))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},{more}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port},{more}\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{protocols}\n"
        )
    }

    fn spawn(&mut self, id: i32) {
        let at = id as usize - 1;
        assert!(self.processes[at].is_none(), "node {id} is already running");
        let launch = Launch {
            jvm_args: [
                "-Xms256m",
                "-Xmx512m",
                "-XX:+UseG1GC",
                "-XX:TieredStopAtLevel=1",
            ]
            .iter()
            .map(|arg| arg.to_string())
            .chain(self.setup.jvm_args.iter().cloned())
            .collect(),
            detach: false,
            dies_with_thread: self.setup.dies_with_thread,
        };
        self.processes[at] = Some(must(self.nodes[at].launch(&libs_dir(), &launch)));
    }

    /// Waits until every running node is in the metadata and every
    /// partition reported has a leader (after a kill, until the logs are
    /// recovered and the leaders elected).
    fn wait_ready(&mut self) {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .set("group.id", unique("ready-check"))
            .create()
            .expect("metadata client");
        let processes = &mut self.processes;
        let waited =
            inbox_services::wait_until(READY_TIMEOUT, "the private Kafka did not answer", || {
                let mut running = 0;
                for (at, process) in processes.iter_mut().enumerate() {
                    if let Some(status) = process
                        .as_mut()
                        .and_then(|p| p.try_wait().expect("try_wait"))
                    {
                        return Err(format!(
                            "node {} exited during start-up ({status:?})",
                            at + 1
                        ));
                    }
                    running += usize::from(process.is_some());
                }
                let metadata = client.fetch_metadata(None, Duration::from_secs(2));
                Ok(metadata.is_ok_and(|metadata| {
                    metadata.brokers().len() == running
                        && metadata.topics().iter().all(|topic| {
                            topic.error().is_none()
                                && topic.partitions().iter().all(|p| p.leader() >= 0)
                        })
                }))
            });
        self.must_wait(waited);
    }
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        for mut process in self.processes.drain(..).flatten() {
            let _ = process.kill();
            let _ = process.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The partition of `__consumer_offsets` that holds `group`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions`, with Java's String hash over
/// UTF-16 code units.
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let hash = group.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    (hash & 0x7fff_ffff) % partitions
}

/// The jars of the shared broker's version, or `INBOX_TEST_KAFKA_LIBS` (those
/// of the version `make compat` runs).
fn libs_dir() -> PathBuf {
    std::env::var_os("INBOX_TEST_KAFKA_LIBS")
        .map(PathBuf::from)
        .unwrap_or_else(|| inbox_services::repo().join(".local/kafka/libs"))
}
