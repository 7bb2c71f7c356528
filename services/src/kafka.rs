//! An Apache Kafka KRaft node (broker and controller in one JVM) from
//! Maven Central's jars: its settings the project's template
//! (`scripts/services/kafka-server.properties`) filled in for the node and
//! its cluster, then the caller's own lines; its storage formatted with
//! `kafka.tools.StorageTool`; `kafka.Kafka` launched on it. A cluster of
//! one node has a dynamic quorum (`--standalone`), a larger one a static
//! quorum of all its nodes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{read, repo, run, write, Result};

/// One node: its id, ports on 127.0.0.1 and directory (which holds
/// `server.properties`, `data/`, `stdout.log`, `server.log` and `kafka.pid`).
#[derive(Debug, Clone)]
pub struct Node {
    pub id: u32,
    pub port: u16,
    pub controller_port: u16,
    pub dir: PathBuf,
}

/// How a node's JVM runs.
#[derive(Debug, Default, Clone)]
pub struct Launch {
    /// JVM options (heap, collector, `-D...`) before the class path.
    pub jvm_args: Vec<String>,
    /// In a session of its own (setsid): it outlives the command that
    /// started it (a CI step, a shell).
    pub detach: bool,
    /// Killed when the thread that started it ends (PR_SET_PDEATHSIG): a
    /// test's node dies with the test binary, even a killed one.
    pub dies_with_thread: bool,
}

/// A JVM for Kafka's tool classes (StorageTool, TopicCommand...) on the
/// jars in `libs`; TieredStopAtLevel=1 and SerialGC start it faster.
pub fn tool(libs: &Path) -> Command {
    let mut java = Command::new("java");
    java.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .args([
            "-Djava.awt.headless=true",
            &log4j2("tools-log4j2.xml"),
            "-cp",
        ])
        .arg(format!("{}/*", libs.display()))
        .stdin(Stdio::null());
    java
}

/// Runs one of Kafka's tools to its end; what it printed.
pub fn run_tool(libs: &Path, args: &[&str]) -> Result<String> {
    let output = run(tool(libs).args(args))?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn log4j2(file: &str) -> String {
    let path = repo().join("scripts/kafka").join(file);
    format!("-Dlog4j2.configurationFile={}", path.display())
}

/// A fresh cluster id: a Kafka Uuid is 16 random bytes in unpadded URL-safe
/// base64; one not starting with '-' (which the tool would take for a flag).
pub fn new_cluster_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    loop {
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut bytes))
            .map_err(|e| format!("/dev/urandom: {e}"))?;
        let id = base64_url(&bytes);
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

/// Unpadded URL-safe base64 (RFC 4648 §5).
pub fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

impl Node {
    pub fn config(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn stdout_log(&self) -> PathBuf {
        self.dir.join("stdout.log")
    }

    pub fn server_log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("kafka.pid")
    }

    /// The template filled in for this node of `cluster` (every node, this
    /// one too), `internal_partitions` partitions for each internal topic,
    /// then `own` (a later line wins).
    pub fn settings(
        &self,
        cluster: &[Node],
        internal_partitions: u32,
        own: &str,
    ) -> Result<String> {
        let quorum = match cluster {
            [one] => format!(
                "controller.quorum.bootstrap.servers=127.0.0.1:{}",
                one.controller_port
            ),
            nodes => {
                let voters: Vec<String> = nodes
                    .iter()
                    .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
                    .collect();
                format!("controller.quorum.voters={}", voters.join(","))
            }
        };
        Ok(crate::template("kafka-server.properties")?
            .replace("@NODE_ID@", &self.id.to_string())
            .replace("@PORT@", &self.port.to_string())
            .replace("@CONTROLLER_PORT@", &self.controller_port.to_string())
            .replace("@QUORUM@", &quorum)
            .replace("@DATA_DIR@", &self.data().display().to_string())
            .replace("@REPLICAS@", &cluster.len().to_string())
            .replace("@INTERNAL_PARTITIONS@", &internal_partitions.to_string())
            .replace("@INTERNAL_MIN_ISR@", &cluster.len().min(2).to_string())
            + own)
    }

    /// Writes `settings` as its server.properties; whether they changed.
    pub fn write_config(&self, settings: &str) -> Result<bool> {
        let changed = read(&self.config()).map_or(true, |old| old != settings);
        if changed {
            write(&self.config(), settings)?;
        }
        Ok(changed)
    }

    /// The cluster id of its formatted storage (when formatted for this node).
    pub fn cluster_id(&self) -> Option<String> {
        let meta = read(&self.data().join("meta.properties")).ok()?;
        let node = format!("node.id={}", self.id);
        meta.lines().any(|line| line == node).then_some(())?;
        let id = meta
            .lines()
            .find_map(|line| line.strip_prefix("cluster.id="));
        id.map(str::to_owned)
    }

    /// Starts formatting its storage for `cluster_id` (a cluster of `size`
    /// nodes), with the caller's options (`--add-scram ...`); [`finish`]
    /// waits for it, so that the formats of a cluster run side by side.
    pub fn format(
        &self,
        libs: &Path,
        cluster_id: &str,
        size: usize,
        args: &[String],
    ) -> Result<Child> {
        tool(libs)
            .args(["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c"])
            .arg(self.config())
            .args(if size == 1 {
                &["--standalone"][..]
            } else {
                &[]
            })
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run kafka.tools.StorageTool: {e}"))
    }

    /// Launches `kafka.Kafka` on its settings, its output appended to
    /// stdout.log, its pid written to kafka.pid.
    pub fn launch(&self, libs: &Path, launch: &Launch) -> Result<Child> {
        let stdout = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stdout_log())
            .and_then(|file| Ok((file.try_clone()?, file)))
            .map_err(|e| format!("{}: {e}", self.stdout_log().display()))?;
        let (detach, dies_with_thread) = (launch.detach, launch.dies_with_thread);
        let mut java = Command::new("java");
        // SAFETY: setsid(2) and prctl(2) only, between fork and exec.
        unsafe {
            java.pre_exec(move || {
                if detach {
                    libc::setsid();
                }
                if dies_with_thread {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                }
                Ok(())
            });
        }
        let child = java
            .current_dir(&self.dir)
            .args(&launch.jvm_args)
            .arg("-Djava.awt.headless=true")
            .arg(format!("-Dkafka.logs.dir={}", self.dir.display()))
            .args([
                log4j2("log4j2.xml"),
                "-cp".into(),
                format!("{}/*", libs.display()),
            ])
            .arg("kafka.Kafka")
            .arg(self.config())
            .stdin(Stdio::null())
            .stdout(stdout.0)
            .stderr(stdout.1)
            .spawn()
            .map_err(|e| format!("cannot start java kafka.Kafka: {e}"))?;
        write(&self.pid_file(), &format!("{}\n", child.id()))?;
        Ok(child)
    }

    /// The pid of its JVM while it runs (from kafka.pid, checked against
    /// /proc so that a recycled pid is not taken for it).
    pub fn pid(&self) -> Option<i32> {
        let pid: i32 = read(&self.pid_file()).ok()?.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let ours = format!("kafka.Kafka\0{}", self.config().display());
        String::from_utf8_lossy(&cmdline)
            .contains(&ours)
            .then_some(pid)
    }

    /// Both logs of the node, for failure messages.
    pub fn log_text(&self) -> String {
        [self.stdout_log(), self.server_log()]
            .iter()
            .map(|file| read(file).unwrap_or_default())
            .collect()
    }
}

/// Waits for a storage format [`Node::format`] started.
pub fn finish(format: Child, node: &Node) -> Result<()> {
    let output = format
        .wait_with_output()
        .map_err(|e| format!("StorageTool: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let (out, err) = (output.stdout, output.stderr);
    Err(format!(
        "formatting node {}'s storage failed: {}{}",
        node.id,
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    ))
}
