//! A PostgreSQL 15 server of one test's own, for tests that stop and start
//! the database: the shared cluster on 5432 serves every other test running
//! in parallel and must never go down.
//!
//! A cluster of `inbox_services::postgres` (the launcher of the shared
//! cluster too) in a fresh directory (data, socket, log) on a free loopback
//! port; dropping it stops the server and removes the directory. As root
//! the directory is the `postgres` user's, who runs the server.
//! Anything that keeps it from starting FAILS the test, it never skips.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use inbox_services::postgres::Cluster;
use inbox_services::{chown_to_server_user, is_root, SERVER_USER};
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

use super::{binary, free_port, TestDb};

/// The service's role and database, as in the default DATABASE_URL (docs/design.md#configuration).
const ROLE: &str = "inventory";
const PASSWORD: &str = "inventory";
const DATABASE: &str = "inventory";
/// The login of a TLS server that proves itself by a client certificate
/// (no password), a member of the service's runtime role.
pub const CERT_ROLE: &str = "inventory_cert";

/// A running (or deliberately stopped) private PostgreSQL server.
pub struct PrivatePostgres {
    /// Holds `data/`, the unix socket and `server.log`; removed on drop.
    dir: PathBuf,
    cluster: Cluster,
    /// Whether the test stopped the server on purpose (so drop knows).
    running: bool,
}

/// What the launcher said when it failed: the test fails with it.
fn must<T>(outcome: inbox_services::Result<T>) -> T {
    outcome.unwrap_or_else(|error| panic!("private PostgreSQL: {error}"))
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
        let mut server = PrivatePostgres::new();
        must(server.cluster.initdb(&["--auth=trust", "--no-sync"]));
        server.configure(extra_settings);
        if tls {
            server.make_certificate();
        }
        server.start_again();
        must(server.cluster.psql(
            "postgres",
            &format!(
                "CREATE ROLE {ROLE} LOGIN CREATEROLE PASSWORD '{PASSWORD}';\n\
                 CREATE DATABASE {DATABASE} OWNER {ROLE};"
            ),
        ));
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

    /// A server not made yet: a fresh directory and a free port.
    fn new() -> PrivatePostgres {
        let dir = server_dir();
        let cluster = Cluster {
            data: dir.join("data"),
            socket: dir.clone(),
            port: free_port(),
            log: dir.join("server.log"),
        };
        PrivatePostgres {
            dir,
            cluster,
            running: false,
        }
    }

    /// The project's settings, then this server's own (a later line wins).
    fn configure(&self, extra_settings: &str) {
        must(self.cluster.configure(
            &format!(
                "# private test server\nport = {}\nlisten_addresses = '127.0.0.1'\n\
                 unix_socket_directories = '{}'\n\
                 # The test stops the server cleanly; surviving an OS crash is not its subject.\n\
                 fsync = off\n{extra_settings}",
                self.cluster.port,
                self.dir.display()
            ),
            None,
        ));
    }

    /// The service's DATABASE_URL for this server.
    pub fn url(&self) -> String {
        format!(
            "postgres://{ROLE}:{PASSWORD}@127.0.0.1:{}/{DATABASE}",
            self.cluster.port
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

    /// Stops the server the way an operator's restart does (fast: open
    /// sessions are terminated) and waits until it is down.
    pub fn stop(&mut self) {
        must(self.cluster.stop("fast"));
        self.running = false;
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&mut self) {
        must(self.cluster.start());
        self.running = true;
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.cluster.port
    }

    /// A streaming standby of this server (`pg_basebackup -R`, asynchronous,
    /// hot), started and following it. Its own directory and port.
    pub fn standby(&self) -> PrivatePostgres {
        let mut standby = PrivatePostgres::new();
        must(self.cluster.base_backup(&standby.cluster));
        standby.configure("hot_standby = on");
        standby.start_again();
        standby
    }

    /// Runs SQL as the superuser; its output, unaligned and tuples only.
    pub fn sql(&self, statement: &str) -> String {
        must(self.cluster.psql(DATABASE, statement))
    }

    /// kill -9 of the postmaster, as a crashed machine: no shutdown at all.
    pub fn kill_nine(&mut self) {
        must(self.cluster.kill());
        self.running = false;
    }

    fn data_dir(&self) -> String {
        self.cluster.data.display().to_string()
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
        chown_to_server_user(
            &["server.crt", "server.key", "root.crt"].map(|f| Path::new(&data).join(f)),
        )
        .expect("chown the server's certificate");
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
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self.cluster.stop("immediate");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
        let writable = chown_to_server_user(std::slice::from_ref(&dir)).is_ok()
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
