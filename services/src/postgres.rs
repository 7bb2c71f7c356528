//! A PostgreSQL 15 cluster of Debian's binaries: made with initdb, its
//! settings the project's template (`scripts/services/postgresql.conf`)
//! then the cluster's own, started and stopped with `pg_ctl`, ready when
//! `pg_isready` says so. As root its programs run as the server user.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{as_server_user, chown_to_server_user, read, run, tail, wait_until, write, Result};

/// Debian's PostgreSQL 15 binaries (`apt-get install postgresql-15`).
pub const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// Longest wait for a start, a restart or a stop.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Our settings in the data directory, included by its postgresql.conf and
/// rewritten by every `configure`, so that a change reaches a cluster.
const SETTINGS: &str = "inventory-inbox.conf";

/// A cluster: its data directory, the directory of its unix socket
/// (superuser access without a password), its port on 127.0.0.1, its log.
pub struct Cluster {
    pub data: PathBuf,
    pub socket: PathBuf,
    pub port: u16,
    pub log: PathBuf,
}

/// A PostgreSQL program, as the server user.
fn program(name: &str) -> Command {
    as_server_user(Path::new(BIN_DIR).join(name))
}

impl Cluster {
    /// Whether initdb has made the data directory.
    pub fn exists(&self) -> bool {
        self.data.join("PG_VERSION").exists()
    }

    /// initdb: UTF-8, the superuser `postgres`, and the caller's options
    /// (`--auth...`).
    pub fn initdb(&self, options: &[&str]) -> Result<()> {
        if !Path::new(BIN_DIR).join("initdb").exists() {
            return Err(format!(
                "PostgreSQL 15 binaries not found in {BIN_DIR}: run `scripts/services.sh up` (it installs them)"
            ));
        }
        let mut initdb = program("initdb");
        initdb.arg("-D").arg(&self.data);
        run(initdb
            .args(["-U", "postgres", "--encoding=UTF8", "--locale=C.UTF-8"])
            .args(options))
        .map(drop)
    }

    /// Writes the project's settings, then `own` (a later line wins); with
    /// `hba`, its pg_hba.conf too.
    pub fn configure(&self, own: &str, hba: Option<&str>) -> Result<()> {
        let template = crate::template("postgresql.conf")?;
        let header = "# Written by inbox-services; edit scripts/services/postgresql.conf.";
        write(
            &self.data.join(SETTINGS),
            &format!("{header}\n{template}\n{own}\n"),
        )?;
        let mut files = vec![self.data.join(SETTINGS)];
        if let Some(hba) = hba {
            write(&self.data.join("pg_hba.conf"), hba)?;
            files.push(self.data.join("pg_hba.conf"));
        }
        let conf = self.data.join("postgresql.conf");
        let text = read(&conf)?;
        let include = format!("include_if_exists = '{SETTINGS}'");
        if !text.lines().any(|line| line == include) {
            write(&conf, &format!("{text}\n{include}\n"))?;
        }
        chown_to_server_user(&files)
    }

    /// Starts it and waits until it accepts connections.
    pub fn start(&self) -> Result<()> {
        self.pg_ctl(&["-l", &self.log.display().to_string(), "-w", "start"])
    }

    /// Stops it in `mode` (`fast`: sessions terminated; `immediate`: no
    /// shutdown checkpoint) and waits until it is down.
    pub fn stop(&self, mode: &str) -> Result<()> {
        self.pg_ctl(&["-m", mode, "-w", "stop"])?;
        // postgres removes its own pid file; one a killed server left is stale.
        crate::remove(&self.data.join("postmaster.pid"));
        Ok(())
    }

    /// A restart as an operator does it (fast: open sessions are
    /// terminated); waits until it accepts connections.
    pub fn restart(&self) -> Result<()> {
        self.pg_ctl(&[
            "-l",
            &self.log.display().to_string(),
            "-m",
            "fast",
            "-w",
            "restart",
        ])
    }

    /// Re-reads the settings (those that need a restart stay pending).
    pub fn reload(&self) -> Result<()> {
        self.pg_ctl(&["reload"])
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<()> {
        let mut pg_ctl = program("pg_ctl");
        pg_ctl
            .arg("-D")
            .arg(&self.data)
            .args(["-t", &TIMEOUT.as_secs().to_string()]);
        run(pg_ctl.args(args).stdin(Stdio::null()))
            .map(drop)
            .map_err(|e| format!("{e}\n{}", tail(&self.log, 40)))
    }

    /// The postmaster's pid while it runs. A postmaster.pid whose process
    /// is gone, or is not a postgres, is stale.
    pub fn pid(&self) -> Option<i32> {
        let text = read(&self.data.join("postmaster.pid")).ok()?;
        let pid: i32 = text.lines().next()?.trim().parse().ok()?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        (exe == Path::new(BIN_DIR).join("postgres")).then_some(pid)
    }

    /// kill -9 of the postmaster, as a crashed machine: no shutdown at all.
    pub fn kill(&self) -> Result<()> {
        let pid = self.pid().ok_or("postgres is not running")?;
        crate::signal(pid, libc::SIGKILL)
            .then_some(())
            .ok_or(format!("kill -9 {pid} failed"))
    }

    /// Whether it accepts connections on its TCP port.
    pub fn ready(&self) -> bool {
        let mut pg_isready = Command::new(Path::new(BIN_DIR).join("pg_isready"));
        let port = self.port.to_string();
        let status = pg_isready
            .args(["-q", "-h", "127.0.0.1", "-p", &port])
            .status();
        status.is_ok_and(|status| status.success())
    }

    /// Waits until it accepts connections; fails at once when it exited.
    pub fn wait_ready(&self) -> Result<()> {
        wait_until(TIMEOUT, "postgres did not accept connections", || {
            match (self.ready(), self.pid()) {
                (true, _) => Ok(true),
                (false, Some(_)) => Ok(false),
                (false, None) => Err("postgres exited during start-up".into()),
            }
        })
        .map_err(|e| format!("{e} (127.0.0.1:{})\n{}", self.port, tail(&self.log, 40)))
    }

    /// Runs `sql` (psql's input: `\gexec` works) in `database` as the
    /// superuser, over the socket; its output, unaligned and tuples only.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String> {
        let mut psql = program("psql");
        psql.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.socket);
        psql.args([
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            database,
        ]);
        let mut child = psql
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        let sent = child.stdin.take().expect("piped").write_all(sql.as_bytes());
        let output = child.wait_with_output().map_err(|e| format!("psql: {e}"))?;
        if sent.is_err() || !output.status.success() {
            let error = String::from_utf8_lossy(&output.stderr);
            return Err(format!("psql: {sql}\n{error}"));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// A streaming standby of this (running) cluster in `standby`'s data
    /// directory: `pg_basebackup -R`, asynchronous and hot. Not started.
    pub fn base_backup(&self, standby: &Cluster) -> Result<()> {
        self.backup_into(&standby.data, &["-R", "--no-sync"])
    }

    /// A base backup of this (running) cluster into `dir`, which must not
    /// exist: the WAL streamed alongside (it starts on its own), after a
    /// fast checkpoint; `options` are pg_basebackup's.
    pub fn backup_into(&self, dir: &Path, options: &[&str]) -> Result<()> {
        let mut backup = program("pg_basebackup");
        backup.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
        ]);
        backup.arg("-D").arg(dir);
        run(backup.args(["-X", "stream", "-c", "fast"]).args(options)).map(drop)
    }
}
