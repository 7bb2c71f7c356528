//! A PostgreSQL primary with an asynchronous streaming standby behind one
//! endpoint, for the fault runs (make chaos, make explore): the database
//! the consumers reach through the endpoint can be restarted, backed up and
//! put back, and failed over to a standby that lacks the last commits,
//! without touching the shared cluster of `scripts/services.sh`.
//!
//! The primary listens on 127.0.0.1:15432 and its standby on 15433; the
//! endpoint 127.0.0.1:25433 is a toxiproxy proxy named `pair`, as a
//! cluster's DNS name. The server behind the endpoint is the one the
//! proxy's upstream names: after a failover every command acts on the
//! promoted standby. Everything lives in one directory: both data
//! directories and their logs, the socket directory, the last backup, and
//! `toxiproxy.started` when `up` started the toxiproxy server (`down` then
//! stops it; one found running is left so).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::postgres::Cluster;
use crate::toxiproxy::Api;
use crate::{chown_to_server_user, remove, repo, run, wait_until, Result};

macro_rules! log {
    ($($arg:tt)*) => { eprintln!("[db-pair] {}", format_args!($($arg)*)) };
}

pub const PRIMARY_PORT: u16 = 15432;
pub const STANDBY_PORT: u16 = 15433;
/// Where clients connect: the proxy in front of the serving server.
pub const ENDPOINT: &str = "127.0.0.1:25433";
const PROXY: &str = "pair";
/// The primary's settings, after initdb's; its standby copies them.
const SETTINGS: &str = "
# inbox-services pair
listen_addresses = '127.0.0.1'
max_connections = 100
shared_buffers = 128MB
synchronous_commit = on
wal_level = replica
max_wal_senders = 4
hot_standby = on
timezone = 'UTC'
";
/// Longest wait for a killed server's processes to go away.
const GONE_TIMEOUT: Duration = Duration::from_secs(5);

/// The pair in its directory, and the toxiproxy server its endpoint is on.
pub struct Pair {
    dir: PathBuf,
    proxies: Api,
}

impl Pair {
    pub fn new(dir: PathBuf, proxies: Api) -> Pair {
        Pair { dir, proxies }
    }

    fn primary(&self) -> Cluster {
        self.cluster("primary", PRIMARY_PORT)
    }

    fn standby(&self) -> Cluster {
        self.cluster("standby", STANDBY_PORT)
    }

    fn cluster(&self, name: &str, port: u16) -> Cluster {
        Cluster {
            data: self.dir.join(name),
            socket: self.dir.join("run"),
            port,
            log: self.dir.join(format!("{name}.log")),
        }
    }

    /// The server behind the endpoint.
    fn serving(&self) -> Result<Cluster> {
        let upstream = self.proxies.upstream(PROXY)?;
        if upstream.ends_with(&format!(":{STANDBY_PORT}")) {
            Ok(self.standby())
        } else {
            Ok(self.primary())
        }
    }

    fn backup(&self) -> PathBuf {
        self.dir.join("backup")
    }

    fn toxiproxy_started(&self) -> PathBuf {
        self.dir.join("toxiproxy.started")
    }

    /// A fresh pair in place of any before: the primary (role and database
    /// `inventory`), its standby, and the endpoint on the primary. The
    /// endpoint's URL, without a database.
    pub fn up(&self) -> Result<String> {
        self.down();
        let (primary, standby) = (self.primary(), self.standby());
        std::fs::create_dir_all(&primary.socket)
            .map_err(|e| format!("cannot make {}: {e}", primary.socket.display()))?;
        chown_to_server_user(&[self.dir.clone(), primary.socket.clone()])?;
        primary.initdb(&["--auth=trust"])?;
        let socket = primary.socket.display();
        let own =
            format!("{SETTINGS}port = {PRIMARY_PORT}\nunix_socket_directories = '{socket}'\n");
        append_setting(&primary, &own)?;
        start(&primary, "the primary did not start")?;
        primary.psql(
            "postgres",
            "CREATE ROLE inventory LOGIN CREATEDB CREATEROLE PASSWORD 'inventory';\n\
             CREATE DATABASE inventory OWNER inventory;",
        )?;
        primary.base_backup(&standby)?;
        append_setting(&standby, &format!("port = {STANDBY_PORT}\n"))?;
        start(&standby, "the standby did not start")?;
        if !toxiproxy("status", Stdio::null()).is_ok_and(|up| up) {
            crate::write(&self.toxiproxy_started(), "")?;
        }
        if !toxiproxy("up", Stdio::inherit())? {
            return Err("toxiproxy did not start (scripts/toxiproxy.sh up)".into());
        }
        let _ = self.proxies.delete(PROXY);
        let upstream = format!("127.0.0.1:{PRIMARY_PORT}");
        self.proxies.create(PROXY, ENDPOINT, &upstream)?;
        log!("primary 127.0.0.1:{PRIMARY_PORT}, standby 127.0.0.1:{STANDBY_PORT}, endpoint {ENDPOINT}");
        Ok(format!("postgres://inventory:inventory@{ENDPOINT}"))
    }

    /// A fast restart of the server behind the endpoint.
    pub fn restart(&self) -> Result<()> {
        let serving = self.serving()?;
        serving
            .restart()
            .map_err(|e| format!("{e}\nrestart failed; see {}", serving.log.display()))?;
        log!("restarted {}", name(&serving));
        Ok(())
    }

    /// The standby stops receiving and replaying WAL: what the primary
    /// commits from now on, a failover loses.
    pub fn cut(&self) -> Result<()> {
        let standby = self.standby();
        standby.psql("postgres", "ALTER SYSTEM SET primary_conninfo = ''")?;
        standby.psql("postgres", "SELECT pg_reload_conf()")?;
        standby.psql("postgres", "SELECT pg_wal_replay_pause()")?;
        let lsn = standby.psql("postgres", "SELECT pg_last_wal_replay_lsn()")?;
        log!("standby cut off at {lsn}");
        Ok(())
    }

    /// kill -9 of the primary, the standby resumed and promoted, the
    /// endpoint switched to it (its connections cut).
    pub fn failover(&self) -> Result<()> {
        let (primary, standby) = (self.primary(), self.standby());
        let pid = primary.pid().ok_or("the primary is not running")?;
        primary.kill()?;
        log!("primary killed (kill -9 {pid})");
        standby.psql("postgres", "SELECT pg_wal_replay_resume()")?;
        if standby.psql("postgres", "SELECT pg_promote(true, 60)")? != "t" {
            return Err("promotion failed".into());
        }
        let upstream = format!("127.0.0.1:{STANDBY_PORT}");
        self.proxies.set_upstream(PROXY, &upstream)?;
        log!("standby promoted; endpoint {ENDPOINT} -> {upstream}");
        Ok(())
    }

    /// A base backup of the server behind the endpoint, replacing the one
    /// kept only once it is complete.
    pub fn take_backup(&self) -> Result<()> {
        let serving = self.serving()?;
        let taking = self.dir.join("backup.new");
        remove(&taking);
        serving.backup_into(&taking, &[])?;
        remove(&self.backup());
        std::fs::rename(&taking, self.backup())
            .map_err(|e| format!("cannot keep {}: {e}", taking.display()))?;
        log!("backup of {} taken", name(&serving));
        Ok(())
    }

    /// The server behind the endpoint stopped (immediate), its data
    /// replaced by the last backup, started: the database goes back to
    /// that moment, and the standby no longer follows it.
    pub fn restore(&self) -> Result<()> {
        if !self.backup().is_dir() {
            return Err("no backup to restore (scripts/db-pair.sh backup)".into());
        }
        let serving = self.serving()?;
        let _ = serving.stop("immediate");
        remove(&serving.data);
        run(Command::new("cp")
            .arg("-a")
            .arg(self.backup())
            .arg(&serving.data))?;
        // The backup may come from the other server: this one keeps its port.
        append_setting(&serving, &format!("port = {}\n", serving.port))?;
        remove(&serving.data.join("standby.signal"));
        start(&serving, "the restored server did not start")?;
        log!("{} restored from the backup", name(&serving));
        Ok(())
    }

    /// Both servers stopped and removed with their directory, the
    /// endpoint too, and the toxiproxy server if `up` started it. Does
    /// what it can and says nothing.
    pub fn down(&self) {
        for cluster in [self.primary(), self.standby()] {
            if cluster.data.join("postmaster.pid").exists() {
                let _ = cluster.stop("immediate");
            }
        }
        // A killed primary's backends go away by themselves; wait for them.
        let dir = format!("{}/", self.dir.display());
        let _ = wait_until(GONE_TIMEOUT, "", || Ok(!a_process_mentions(&dir)));
        let _ = self.proxies.delete(PROXY);
        if self.toxiproxy_started().exists() {
            let _ = toxiproxy("down", Stdio::null());
        }
        remove(&self.dir);
    }
}

/// Starts a server; an error ends with `failed` and where its log is.
fn start(cluster: &Cluster, failed: &str) -> Result<()> {
    cluster
        .start()
        .map_err(|e| format!("{e}\n{failed}; see {}", cluster.log.display()))
}

/// The server's name in the pair: its data directory's.
fn name(cluster: &Cluster) -> String {
    let name = cluster.data.file_name().unwrap_or_default();
    name.to_string_lossy().into_owned()
}

/// Appends to the server's postgresql.conf: a later line wins.
fn append_setting(cluster: &Cluster, text: &str) -> Result<()> {
    let conf = cluster.data.join("postgresql.conf");
    OpenOptions::new()
        .append(true)
        .open(&conf)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", conf.display()))
}

/// Runs `scripts/toxiproxy.sh COMMAND`, its output to `stderr` and
/// nowhere else (the caller's stdout carries the endpoint's URL); whether
/// it succeeded.
fn toxiproxy(command: &str, stderr: Stdio) -> Result<bool> {
    let script = repo().join("scripts/toxiproxy.sh");
    let status = Command::new(&script)
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .status();
    let status = status.map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    Ok(status.success())
}

/// Whether a process other than this one has `text` in its command line.
fn a_process_mentions(text: &str) -> bool {
    let me = std::process::id().to_string();
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    processes.flatten().any(|process| {
        let pid = process.file_name();
        let is_pid = pid.to_str().is_some_and(|pid| pid.parse::<u32>().is_ok());
        let cmdline = std::fs::read(Path::new("/proc").join(&pid).join("cmdline"));
        is_pid
            && pid.to_str() != Some(me.as_str())
            && cmdline.is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .contains(text)
            })
    })
}
