//! The consumers a run starts, stops and kills (chaos and explore: a group
//! of them; `run --consumer-bin`: the one under measure): real
//! `inventory-inbox run` processes, each with its own metrics port and log
//! file.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

/// Longest wait for a member to answer `/readyz` 200 (assigned partitions,
/// database reachable) after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for a graceful stop (SIGTERM) before the member is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// What every member of one group shares.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    pub binary: PathBuf,
    pub database_url: String,
    pub bootstrap_servers: String,
    pub topic: String,
    pub group: String,
    pub consumer_name: String,
    /// Extra environment (e.g. `DLQ_TOPIC`, `KAFKA_PROPERTY_*`).
    pub env: Vec<(String, String)>,
    /// Consumer logs go here, one file per member, appended across restarts.
    pub log_dir: PathBuf,
}

/// One member: a slot with a fixed name (its log file), metrics port and
/// (optionally) a static group instance id, whose process may be running or
/// not.
pub struct Member {
    pub name: String,
    metrics_port: u16,
    /// `group.instance.id`: a restarted process takes its partitions back at
    /// once instead of waiting for the old session to expire.
    instance_id: Option<String>,
    config: MemberConfig,
    process: Option<Child>,
    /// When the running process was started.
    started: Option<Instant>,
}

impl Member {
    /// A member; with `instance`, a static one (`group.instance.id` is the
    /// group's name and `instance`).
    pub fn new(
        config: &MemberConfig,
        name: &str,
        metrics_port: u16,
        instance: Option<&str>,
    ) -> Member {
        Member {
            name: name.to_owned(),
            metrics_port,
            instance_id: instance.map(|instance| format!("{}-{instance}", config.group)),
            config: config.clone(),
            process: None,
            started: None,
        }
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// The running process's id.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(Child::id)
    }

    /// Starts the process; does not wait for it to be ready.
    pub fn start(&mut self) -> Result<()> {
        if self.process.is_some() {
            bail!("member {} is already running", self.name);
        }
        std::fs::create_dir_all(&self.config.log_dir)
            .with_context(|| format!("creating {}", self.config.log_dir.display()))?;
        let log_path = self.config.log_dir.join(format!("{}.log", self.name));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let mut command = Command::new(&self.config.binary);
        command
            .arg("run")
            .env("DATABASE_URL", &self.config.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.config.bootstrap_servers)
            .env("KAFKA_TOPIC", &self.config.topic)
            .env("KAFKA_GROUP_ID", &self.config.group)
            .env("INBOX_CONSUMER_NAME", &self.config.consumer_name)
            .env("METRICS_ADDR", format!("127.0.0.1:{}", self.metrics_port))
            .env("RUST_LOG", "info")
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        if let Some(id) = &self.instance_id {
            command.env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", id);
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.config.binary.display()))?;
        self.process = Some(child);
        self.started = Some(Instant::now());
        Ok(())
    }

    /// How long the running process has run.
    pub fn uptime(&self) -> Option<Duration> {
        self.process.as_ref().and(self.started.map(|s| s.elapsed()))
    }

    /// Moves the consumer's positions in the database back to the earliest
    /// offsets (`inventory-inbox positions set --offset earliest`): the
    /// database is the authority on where partitions start, so a re-read of
    /// the topic is asked for there, not by a new group alone.
    pub async fn rewind_positions(&self) -> Result<()> {
        self.tool(&["positions", "set", "--offset", "earliest"])
            .await
    }

    /// Runs `inventory-inbox ARGS` (a tool beside `run`: `positions`,
    /// `maintain`) with this member's settings; fails with what it said.
    pub async fn tool(&self, args: &[&str]) -> Result<()> {
        let output = Command::new(&self.config.binary)
            .args(args)
            .env("DATABASE_URL", &self.config.database_url)
            .env("KAFKA_BOOTSTRAP_SERVERS", &self.config.bootstrap_servers)
            .env("KAFKA_TOPIC", &self.config.topic)
            .env("KAFKA_GROUP_ID", &self.config.group)
            .env("INBOX_CONSUMER_NAME", &self.config.consumer_name)
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .await
            .with_context(|| {
                format!(
                    "running {} {}",
                    self.config.binary.display(),
                    args.join(" ")
                )
            })?;
        if !output.status.success() {
            bail!(
                "{} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }

    /// SIGSTOP (`pause`) or SIGCONT: a process frozen past its session, as
    /// a long GC pause or a descheduled VM freezes one.
    pub fn signal(&self, signal: libc::c_int) -> Result<()> {
        let Some(pid) = self.process.as_ref().and_then(Child::id) else {
            bail!("member {} is not running", self.name);
        };
        // SAFETY: kill(2) on our own child's pid, which has not been
        // reaped (`process` still holds it), so it cannot have been recycled.
        if unsafe { libc::kill(pid as i32, signal) } != 0 {
            bail!(
                "signal {signal} to member {}: {}",
                self.name,
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// Waits until `/readyz` answers 200; fails if the process exits.
    pub async fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        loop {
            let Some(child) = self.process.as_mut() else {
                bail!("member {} is not running", self.name);
            };
            if let Some(status) = child.try_wait()? {
                self.process = None;
                bail!(
                    "member {} exited during start-up ({status}); see {}",
                    self.name,
                    self.config
                        .log_dir
                        .join(format!("{}.log", self.name))
                        .display()
                );
            }
            if crate::probes::scrape::fetch(&format!(
                "http://127.0.0.1:{}/readyz",
                self.metrics_port
            ))
            .await
            .is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!("member {} not ready within {READY_TIMEOUT:?}", self.name);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Crash: SIGKILL, no goodbye to the group or the database.
    pub async fn kill(&mut self) -> Result<()> {
        let Some(mut child) = self.process.take() else {
            bail!("member {} is not running", self.name);
        };
        child.kill().await.context("kill -9")?;
        Ok(())
    }

    /// Graceful stop: SIGTERM (finish the batch, commit, leave the group);
    /// fails when the process does not exit cleanly in time.
    pub async fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.process.take() else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            // SAFETY: kill(2) on our own child's pid, which `child` has not
            // reaped yet, so it cannot have been recycled.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => bail!("member {} stopped with {status}", self.name),
            Ok(Err(error)) => bail!("member {}: waiting for it: {error}", self.name),
            Err(_) => {
                child.kill().await.ok();
                bail!("member {} did not stop within {STOP_TIMEOUT:?}", self.name)
            }
        }
    }

    /// Whether the process died on its own (a crash the run did not cause).
    /// When the process exited on its own, says how (and the member is then
    /// no longer running: it may be started again).
    pub fn exited_unexpectedly(&mut self) -> Option<String> {
        let child = self.process.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.process = None;
                Some(format!("member {} exited: {status}", self.name))
            }
            _ => None,
        }
    }
}
