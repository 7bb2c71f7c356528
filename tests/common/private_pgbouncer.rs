//! A PgBouncer of one test's own (Debian's package, `scripts/test-deps.sh`
//! installs it), in front of the shared PostgreSQL, configured as commonly
//! deployed: `ignore_startup_parameters = extra_float_digits` and nothing
//! more, SCRAM for its clients, the test's database listed by name (any
//! other is unknown to it), and in transaction pooling few server
//! connections, so that clients take turns on them as in production.
//!
//! It runs in the foreground on a free loopback port, from a fresh directory
//! (config, user list, log) that the server user owns (PgBouncer refuses to
//! run as root: as root it is started with `-u postgres`); dropping it kills
//! the process and removes the directory. The Debian service is not used.
//! Anything that keeps it from starting FAILS the test, it never skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use inbox_services::{is_root, SERVER_USER};

use super::private_pg::server_dir;
use super::{free_port, TestDb, APP_ROLE};

/// Debian's binary (`apt-get install pgbouncer`).
const BINARY: &str = "/usr/sbin/pgbouncer";
/// Longest wait for it to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Server connections per user and database in transaction pooling: fewer
/// than a consumer's pool, so its connections take turns on them. In
/// session pooling each client holds one for its session: enough for all.
const TRANSACTION_SERVER_CONNECTIONS: u32 = 2;
const SESSION_SERVER_CONNECTIONS: u32 = 20;

/// A running private PgBouncer.
pub struct PrivatePgBouncer {
    /// Holds `pgbouncer.ini`, `userlist.txt` and `pgbouncer.log`.
    dir: PathBuf,
    port: u16,
    process: Child,
}

impl PrivatePgBouncer {
    /// PgBouncer in `pool_mode` (`session` or `transaction`) in front of the
    /// test's database, for its owner and application roles.
    pub fn start(pool_mode: &str, db: &TestDb) -> PrivatePgBouncer {
        PrivatePgBouncer::start_ignoring(pool_mode, db, "extra_float_digits")
    }

    /// As [`PrivatePgBouncer::start`], ignoring the start-up parameters
    /// `ignored` (comma-separated; "": none, as PgBouncer is installed).
    pub fn start_ignoring(pool_mode: &str, db: &TestDb, ignored: &str) -> PrivatePgBouncer {
        assert!(
            Path::new(BINARY).exists(),
            "{BINARY} is missing: `make test-deps` (scripts/test-deps.sh) installs Debian's pgbouncer"
        );
        let server_connections = match pool_mode {
            "transaction" => TRANSACTION_SERVER_CONNECTIONS,
            _ => SESSION_SERVER_CONNECTIONS,
        };
        let dir = server_dir();
        let port = free_port();
        let config = format!(
            "[databases]\n\
             {name} = host=127.0.0.1 port=5432 dbname={name}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = scram-sha-256\n\
             auth_file = {dir}/userlist.txt\n\
             pool_mode = {pool_mode}\n\
             default_pool_size = {server_connections}\n\
             max_client_conn = 200\n\
             ignore_startup_parameters = {ignored}\n\
             logfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n",
            name = db.name,
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).expect("write pgbouncer.ini");
        std::fs::write(
            dir.join("userlist.txt"),
            format!("\"inventory\" \"inventory\"\n\"{APP_ROLE}\" \"{APP_ROLE}\"\n"),
        )
        .expect("write userlist.txt");
        let mut command = Command::new(BINARY);
        if is_root() {
            command.args(["-u", SERVER_USER]);
        }
        let process = command
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let mut bouncer = PrivatePgBouncer { dir, port, process };
        bouncer.wait_ready();
        bouncer
    }

    fn wait_ready(&mut self) {
        let waited = inbox_services::wait_until(READY_TIMEOUT, "pgbouncer did not listen", || {
            match self.process.try_wait().expect("try_wait") {
                Some(status) => Err(format!("pgbouncer exited with {status}")),
                None => Ok(inbox_services::port_open(self.port)),
            }
        });
        waited.unwrap_or_else(|error| panic!("{error}; its log:\n{}", self.log()));
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `url` (of the shared PostgreSQL) through this PgBouncer.
    pub fn url(&self, url: &str) -> String {
        url.replace("127.0.0.1:5432", &format!("127.0.0.1:{}", self.port))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PrivatePgBouncer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        if std::thread::panicking() {
            eprintln!("pgbouncer's log:\n{}", self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
