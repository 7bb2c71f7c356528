//! A PostgreSQL 15 server of one test's own, for tests that stop and start
//! the database: the shared cluster on 5432 serves every other test running
//! in parallel and must never go down.
//!
//! The server lives in a fresh directory (data, socket, log) on a free
//! loopback port; dropping it stops the server and removes the directory.
//! PostgreSQL refuses to run as root, so as root the directory is handed to
//! the `postgres` user and every server command runs as that user.
//! Anything that keeps it from starting FAILS the test, it never skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use super::{binary, free_port, TestDb};

/// Debian's PostgreSQL 15 binaries (`apt-get install postgresql`, docs/design.md#layout-and-commands).
const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// The service's role and database, as in the default DATABASE_URL (docs/design.md#configuration).
const ROLE: &str = "inventory";
const PASSWORD: &str = "inventory";
const DATABASE: &str = "inventory";
/// The login of a TLS server that proves itself by a client certificate
/// (no password), a member of the service's runtime role.
pub const CERT_ROLE: &str = "inventory_cert";
/// The unprivileged user the server runs as when the tests run as root.
pub(super) const SERVER_USER: &str = "postgres";

/// A running (or deliberately stopped) private PostgreSQL server.
pub struct PrivatePostgres {
    /// Holds `data/`, the unix socket and `server.log`; removed on drop.
    dir: PathBuf,
    port: u16,
    /// Whether the test stopped the server on purpose (so drop knows).
    running: bool,
}

impl PrivatePostgres {
    /// Creates a cluster, starts it, creates the service's role and
    /// database and applies the service's migrations with `inventory-inbox
    /// migrate`.
    pub fn start() -> PrivatePostgres {
        PrivatePostgres::start_with("")
    }

    /// The same, with more lines for its postgresql.conf.
    pub fn start_with(extra_settings: &str) -> PrivatePostgres {
        PrivatePostgres::start_configured(extra_settings, false)
    }

    /// The same, accepting TLS connections (`ssl = on`) with a certificate
    /// its own test CA signed (`make_certificate`), and refusing any other
    /// TCP connection (`hostssl` only in pg_hba.conf).
    pub fn start_tls() -> PrivatePostgres {
        let server =
            PrivatePostgres::start_configured("ssl = on\nssl_ca_file = 'root.crt'\n", true);
        server.sql(&format!(
            "CREATE ROLE {CERT_ROLE} LOGIN IN ROLE inventory_app"
        ));
        server
    }

    fn start_configured(extra_settings: &str, tls: bool) -> PrivatePostgres {
        assert!(
            Path::new(BIN_DIR).join("initdb").exists(),
            "PostgreSQL 15 binaries not found in {BIN_DIR}: run `scripts/services.sh up` (it installs them)"
        );
        let dir = server_dir();
        let port = free_port();
        let mut server = PrivatePostgres {
            dir,
            port,
            running: false,
        };
        server.run(
            "initdb",
            &[
                "-D",
                &server.data_dir(),
                "-U",
                SERVER_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        // The settings of every PostgreSQL of the project, then this
        // server's own (a later line wins).
        let shared = std::fs::read_to_string(super::services_template("postgresql.conf"))
            .expect("read scripts/services/postgresql.conf");
        let settings = format!(
            "\n{shared}\n# private test server\nport = {port}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\n\
             # The test stops the server cleanly; surviving an OS crash is not its subject.\n\
             fsync = off\n{extra_settings}\n",
            server.dir.display()
        );
        let conf = Path::new(&server.data_dir()).join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("read postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).expect("write postgresql.conf");
        if tls {
            server.make_certificate();
        }
        server.start_again();
        server.run(
            "psql",
            &[
                "-h",
                &server.dir.display().to_string(),
                "-p",
                &port.to_string(),
                "-U",
                SERVER_USER,
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                &format!("CREATE ROLE {ROLE} LOGIN CREATEROLE PASSWORD '{PASSWORD}'"),
                "-c",
                &format!("CREATE DATABASE {DATABASE} OWNER {ROLE}"),
            ],
        );
        let migrate = Command::new(binary())
            .arg("migrate")
            .env("DATABASE_URL", server.url())
            .output()
            .expect("run inventory-inbox migrate");
        assert!(
            migrate.status.success(),
            "migrate against the private PostgreSQL failed: {}",
            String::from_utf8_lossy(&migrate.stderr)
        );
        server
    }

    /// The service's DATABASE_URL for this server.
    pub fn url(&self) -> String {
        format!(
            "postgres://{ROLE}:{PASSWORD}@127.0.0.1:{}/{DATABASE}",
            self.port
        )
    }

    /// A `TestDb` on this server's database, for the shared query helpers.
    /// Its pool gives up quickly while the server is down.
    pub async fn test_db(&self) -> TestDb {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(2))
            .connect(&self.url())
            .await
            .expect("connect to the private PostgreSQL");
        TestDb {
            name: DATABASE.into(),
            url: self.url(),
            // The outage is the subject here, not privileges: the owner runs it.
            app_url: self.url(),
            pool,
        }
    }

    /// Stops the server the way an operator's restart does (`pg_ctl stop -m
    /// fast`: open sessions are terminated) and waits until it is down.
    pub fn stop(&mut self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data_dir(),
                "-m",
                "fast",
                "-w",
                "-t",
                "30",
                "stop",
            ],
        );
        self.running = false;
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&mut self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data_dir(),
                "-l",
                &self.dir.join("server.log").display().to_string(),
                "-w",
                "-t",
                "30",
                "start",
            ],
        );
        self.running = true;
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A streaming standby of this server (`pg_basebackup -R`, asynchronous,
    /// hot), started and following it. Its own directory and port.
    pub fn standby(&self) -> PrivatePostgres {
        let dir = server_dir();
        let port = free_port();
        let mut standby = PrivatePostgres {
            dir,
            port,
            running: false,
        };
        standby.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                SERVER_USER,
                "-D",
                &standby.data_dir(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
            ],
        );
        // The primary's settings came with the copy; the later lines win.
        let conf = Path::new(&standby.data_dir()).join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("read postgresql.conf");
        text.push_str(&format!(
            "\n# standby\nport = {port}\nunix_socket_directories = '{}'\nhot_standby = on\n",
            standby.dir.display()
        ));
        std::fs::write(&conf, text).expect("write postgresql.conf");
        standby.start_again();
        standby
    }

    /// Runs SQL as the superuser; its output, unaligned and tuples only.
    pub fn sql(&self, statement: &str) -> String {
        let program = Path::new(BIN_DIR).join("psql");
        let output = as_server_user(
            &program,
            &[
                "-X",
                "-A",
                "-t",
                "-h",
                &self.dir.display().to_string(),
                "-p",
                &self.port.to_string(),
                "-U",
                SERVER_USER,
                "-d",
                DATABASE,
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                statement,
            ],
        )
        .output()
        .expect("run psql");
        assert!(
            output.status.success(),
            "{statement}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// kill -9 of the postmaster, as a crashed machine: no shutdown at all.
    pub fn kill_nine(&mut self) {
        let pid_file = Path::new(&self.data_dir()).join("postmaster.pid");
        let text = std::fs::read_to_string(&pid_file).expect("read postmaster.pid");
        let pid: i32 = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("a pid in postmaster.pid");
        // SAFETY: kill has no memory-safety preconditions.
        let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(killed, 0, "kill -9 {pid}");
        self.running = false;
    }

    fn data_dir(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// A test CA of this server's own and, signed by it, `server.crt` and
    /// `server.key` (PostgreSQL's default file names) for the host name
    /// `localhost` only, in the data directory, owned by the server user;
    /// the CA as `root.crt` there too, so that a client certificate it
    /// signed logs in (`cert` for [`CERT_ROLE`]); and only TLS for TCP.
    /// What a client needs is in [`PrivatePostgres::tls_dir`]: `ca.crt`,
    /// `other-ca.crt` (a CA that signed nothing of this server's), and
    /// `client.crt`, `client.key` for [`CERT_ROLE`].
    fn make_certificate(&self) {
        let data = self.data_dir();
        let tls = self.tls_dir();
        std::fs::create_dir_all(&tls).expect("the TLS directory");
        super::test_ca::make_ca(&tls, "ca", "/CN=inventory-inbox test CA");
        super::test_ca::make_ca(&tls, "other-ca", "/CN=another CA");
        // Signed by the CA: the server's certificate names `localhost` and
        // no address, so a client that connects to 127.0.0.1 and checks
        // the name finds another host's certificate; the client's names
        // the role it logs in as.
        super::test_ca::issue(
            &tls,
            "server",
            "/CN=localhost",
            "subjectAltName=DNS:localhost",
            "ca",
        );
        super::test_ca::issue(
            &tls,
            "client",
            &format!("/CN={CERT_ROLE}"),
            "keyUsage=digitalSignature",
            "ca",
        );
        let tls = tls.display().to_string();
        for (from, to) in [
            ("server.crt", "server.crt"),
            ("server.key", "server.key"),
            ("ca.crt", "root.crt"),
        ] {
            std::fs::copy(format!("{tls}/{from}"), format!("{data}/{to}"))
                .expect("copy into the data directory");
        }
        // The keys are read only by their owners: the server's by the
        // server user, the client's by the tests' user (libpq's rule).
        if is_root() {
            let chown = Command::new("chown")
                .arg(format!("{SERVER_USER}:{SERVER_USER}"))
                .args([
                    format!("{data}/server.crt"),
                    format!("{data}/server.key"),
                    format!("{data}/root.crt"),
                ])
                .status()
                .expect("chown");
            assert!(chown.success(), "chown the server's certificate");
        }
        use std::os::unix::fs::PermissionsExt;
        for key in [format!("{data}/server.key"), format!("{tls}/client.key")] {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .expect("chmod a key");
        }
        let hba = Path::new(&data).join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        let text: String = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("host"))
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(
            &hba,
            text + &format!(
                "hostssl all {CERT_ROLE} 127.0.0.1/32 cert\nhostssl all all 127.0.0.1/32 trust\n"
            ),
        )
        .expect("write pg_hba.conf");
    }

    /// Where a client of a TLS server finds the CA and its certificates
    /// (made by `start_tls`).
    pub fn tls_dir(&self) -> PathBuf {
        self.dir.join("tls")
    }

    /// Runs a PostgreSQL program as the server user; panics with its output
    /// and the server log when it fails.
    fn run(&self, program: &str, args: &[&str]) {
        let program = Path::new(BIN_DIR).join(program);
        let output = as_server_user(&program, args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
        assert!(
            output.status.success(),
            "{} {} failed ({}):\n{}{}\nserver log:\n{}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
        );
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = as_server_user(
                &Path::new(BIN_DIR).join("pg_ctl"),
                &["-D", &self.data_dir(), "-m", "immediate", "-w", "stop"],
            )
            .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(super) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program args`, run through `runuser` as the server user when root.
pub(super) fn as_server_user(program: &Path, args: &[&str]) -> Command {
    let mut command = if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", SERVER_USER, "--"]).arg(program);
        command
    } else {
        Command::new(program)
    };
    command.args(args).env_remove("PGDATA");
    command
}

/// A fresh directory the server user owns and can reach: under cargo's
/// target tmp dir, or under /tmp when a parent of that is closed to it.
pub(super) fn server_dir() -> PathBuf {
    let name = format!("inbox-pg-{}", Uuid::new_v4().simple());
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&name),
        std::env::temp_dir().join(&name),
    ];
    for dir in candidates {
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        if !is_root() {
            return dir;
        }
        let owned = Command::new("chown")
            .arg(format!("{SERVER_USER}:{SERVER_USER}"))
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        let writable = owned
            && Command::new("runuser")
                .args(["-u", SERVER_USER, "--", "test", "-w"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
        if writable {
            return dir;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    panic!(
        "no directory for a private PostgreSQL: neither {} nor {} can be made writable by the `{SERVER_USER}` user",
        env!("CARGO_TARGET_TMPDIR"),
        std::env::temp_dir().display()
    );
}
