//! The services inventory-inbox runs against, started for real on
//! loopback: PostgreSQL 15 clusters (Debian's binaries) and Apache Kafka
//! KRaft nodes (Maven Central's jars), configured from the templates in
//! `scripts/services/`.
//!
//! One launcher serves every caller: the `inbox-services` binary behind
//! `scripts/services.sh` (the shared services of `.local/` on 5432 and
//! 9092, for `make demo`, `make test` and the benchmarks) and the
//! integration tests, which start, kill and restart servers of their own
//! (`tests/common/private_*.rs`).
//!
//! Layout: [`postgres`] (a cluster: initdb, settings, start, stop, kill,
//! readiness), [`kafka`] (a node: settings, storage format, launch,
//! readiness), [`pair`] (a primary and its streaming standby behind one
//! endpoint, for the fault runs, `scripts/db-pair.sh`), [`toxiproxy`] (the
//! API of the proxy that endpoint is), and here what they share (waiting,
//! the templates, running a program as the server user). Errors are plain
//! sentences: every caller shows them to a person and stops.

pub mod kafka;
pub mod pair;
pub mod postgres;
pub mod toxiproxy;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// What went wrong, said for a person (with the log lines that tell why).
pub type Result<T> = std::result::Result<T, String>;

/// The checkout this crate was built from: its `scripts/services/`
/// templates and `scripts/kafka/` logging configurations.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("services/ is in the checkout")
}

/// A configuration template of `scripts/services/`.
pub fn template(name: &str) -> Result<String> {
    read(&repo().join("scripts/services").join(name))
}

/// A file's text; an error names the file.
pub fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Writes a file (and the directories above it); an error names the file.
pub fn write(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(path, text))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Removes a file or a directory tree, if it is there.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir_all(path));
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
}

/// Polls `ready` until it says yes, fails, or `timeout` passes (then the
/// error names `what`). The check itself says whether to go on: it fails
/// when what it waits for can no longer come (a server that exited).
pub fn wait_until(
    timeout: Duration,
    what: &str,
    mut ready: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let started = Instant::now();
    while !ready()? {
        if started.elapsed() >= timeout {
            return Err(format!("{what} within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let shown = all[all.len().saturating_sub(lines)..].join("\n");
    format!(
        "--- last lines of {} ---\n{shown}\n--- end ---",
        path.display()
    )
}

/// Runs a command to its end; its output, or an error with what it printed.
pub fn run(command: &mut Command) -> Result<Output> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if output.status.success() {
        return Ok(output);
    }
    Err(format!(
        "{:?} failed ({}):\n{}{}",
        command,
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The unprivileged user PostgreSQL runs as when we are root (it refuses
/// to run as root), and who must reach its files.
pub const SERVER_USER: &str = "postgres";

/// `program`, run through `runuser` as the server user when root.
pub fn as_server_user(program: impl AsRef<Path>) -> Command {
    let mut command = if is_root() {
        let mut command = Command::new("runuser");
        command
            .args(["-u", SERVER_USER, "--"])
            .arg(program.as_ref());
        command
    } else {
        Command::new(program.as_ref())
    };
    command.env_remove("PGDATA").current_dir("/");
    command
}

/// Hands `path` to the server user (when root).
pub fn chown_to_server_user(paths: &[PathBuf]) -> Result<()> {
    if !is_root() {
        return Ok(());
    }
    run(Command::new("chown")
        .arg(format!("{SERVER_USER}:{SERVER_USER}"))
        .args(paths))
    .map(drop)
}

/// Sends `signal` to `pid`; false when there is no such process.
pub fn signal(pid: i32, signal: i32) -> bool {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) == 0 }
}
