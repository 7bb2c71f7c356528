//! The local tools an operator runs refuse what they cannot do in one line
//! and leave nothing running: `scripts/explore.sh` takes its seeds apart
//! by spaces or commas and refuses anything else before it touches a
//! service; `scripts/toxiproxy.sh` asks its server's API whether it runs,
//! never its pid file, and `down` stops what `up` started.
//!
//! Each script runs as a copy in a sandbox of its own (the scripts work
//! from their own directory), beside stubs of the scripts it calls: the
//! shared services, databases and toxiproxy are never touched. The
//! toxiproxy test uses the binary `scripts/toxiproxy.sh up` installs into
//! `.local/toxiproxy` (from the Go module proxy; the first run installs it
//! into the sandbox when the repository has none yet).

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory standing for the repository; dropped, every process
/// started from it is killed and it is removed.
struct Sandbox(PathBuf);

impl std::ops::Deref for Sandbox {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for pid in processes_in(&self.0) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A sandbox with copies of `scripts` and executable `stubs` (path, script
/// text) of others.
fn sandbox(scripts: &[&str], stubs: &[(&str, &str)]) -> Sandbox {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(common::unique("tool_scripts"));
    std::fs::create_dir_all(dir.join("scripts")).expect("sandbox");
    for script in scripts {
        std::fs::copy(repo().join(script), dir.join(script)).expect("copy the script");
    }
    for (path, text) in stubs {
        use std::os::unix::fs::PermissionsExt;
        let stub = dir.join(path);
        std::fs::write(&stub, format!("#!/usr/bin/env bash\n{text}\n")).expect("stub");
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    Sandbox(dir)
}

/// Runs `bash script ARGS` of `dir` with `env`, killed after `within`: its
/// exit code (-1 when killed) and stderr. The copy is read by bash, never
/// executed itself: a file this process just wrote may still be open in a
/// child another test thread forked at that moment, and executing it then
/// fails with "Text file busy".
fn run(dir: &Path, script: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let within = Duration::from_secs(60);
    let mut command = Command::new("bash");
    command
        .arg(dir.join(script))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("run the script");
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code().unwrap_or(-1);
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    use std::io::Read;
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (code, stderr)
}

#[test]
fn explore_takes_seeds_apart_by_spaces_or_commas_and_refuses_others_in_one_line() {
    // Past its seeds, explore starts the services and a database pair:
    // stubs that say so (the pair refuses to start, ending the run).
    let dir = sandbox(
        &["scripts/explore.sh"],
        &[
            ("scripts/services.sh", "echo \"services $*\" >>\"$(dirname \"$0\")/called\""),
            (
                "scripts/db-pair.sh",
                "echo \"db-pair $*\" >>\"$(dirname \"$0\")/called\"\n[[ $1 == down ]] || { echo 'no pair in a sandbox' >&2; exit 1; }",
            ),
        ],
    );
    let called = || std::fs::read_to_string(dir.join("scripts/called")).unwrap_or_default();
    for (args, env_seeds, refused) in [
        (&["11,x"][..], "", "seed 'x' is not a number"),
        (&[], "11 12;DROP", "seed '12;DROP' is not a number"),
        (&[], ",", "no seed"),
    ] {
        let (code, stderr) = run(
            &dir,
            "scripts/explore.sh",
            args,
            &[("EXPLORE_SEEDS", env_seeds)],
        );
        assert_eq!(code, 2, "{args:?} {env_seeds:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!("explore: {refused}")) && stderr.contains("SEEDS=11,12"),
            "{stderr}"
        );
        assert_eq!(called(), "", "refused before anything started");
    }
    // A comma list is taken: its first seed gets as far as the pair.
    let out = dir.join("out");
    let (code, stderr) = run(
        &dir,
        "scripts/explore.sh",
        &[],
        &[
            ("EXPLORE_SEEDS", "11,12"),
            ("EXPLORE_OUT", out.to_str().unwrap()),
        ],
    );
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr.trim(),
        "explore: seed 11: the database pair did not start: no pair in a sandbox"
    );
    assert!(called().contains("db-pair up"), "{}", called());
}

/// The pids of the processes whose command line names `dir`.
fn processes_in(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn toxiproxy_is_asked_through_its_api_and_down_leaves_nothing_running() {
    let dir = sandbox(&["scripts/toxiproxy.sh"], &[]);
    // The repository's installed binary, when there is one.
    let installed = repo().join(".local/toxiproxy");
    if installed.join("bin/server").exists() {
        std::fs::create_dir_all(dir.join(".local/toxiproxy")).unwrap();
        std::os::unix::fs::symlink(installed.join("bin"), dir.join(".local/toxiproxy/bin"))
            .unwrap();
        std::fs::copy(
            installed.join("version"),
            dir.join(".local/toxiproxy/version"),
        )
        .unwrap();
    }
    let api_port = common::free_port();
    let api = format!("127.0.0.1:{api_port}");
    let listen = format!("127.0.0.1:{}", common::free_port());
    let env = [
        ("TOXIPROXY_API", api.as_str()),
        ("TOXIPROXY_LISTEN", listen.as_str()),
    ];
    let toxiproxy = |command: &str| run(&dir, "scripts/toxiproxy.sh", &[command], &env);
    let (code, stderr) = toxiproxy("up");
    assert_eq!(code, 0, "the first run installs and starts it: {stderr}");
    assert_eq!(toxiproxy("down").0, 0);

    // Something that is no toxiproxy holds the API's port: the server
    // started cannot bind it, and is stopped, however often it is tried.
    let holder = TcpListener::bind(&api).expect("hold the API's port");
    for attempt in 1..=2 {
        let (code, stderr) = toxiproxy("up");
        assert_ne!(code, 0, "attempt {attempt}: {stderr}");
        let last = stderr.trim().lines().last().unwrap_or_default();
        assert!(
            last.contains(&format!("toxiproxy did not start on {api}"))
                && last.contains("address already in use"),
            "attempt {attempt}: {stderr}"
        );
        assert_eq!(
            processes_in(&dir),
            Vec::<u32>::new(),
            "attempt {attempt}: none left"
        );
    }
    drop(holder);

    // A server this script did not start answers: it is used as it is.
    let foreign = Command::new(dir.join(".local/toxiproxy/bin/server"))
        .args(["-host", "127.0.0.1", "-port", &api_port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut foreign = foreign.expect("start a toxiproxy of someone else's");
    let answers = || toxiproxy("status").0 == 0;
    let started = Instant::now();
    while !answers() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the other toxiproxy answers"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(toxiproxy("up").0, 0);
    assert_eq!(
        processes_in(&dir),
        vec![foreign.id()],
        "nothing started beside it"
    );
    // Gone, another `up` starts one of its own, and `down` stops it.
    foreign.kill().unwrap();
    foreign.wait().unwrap();
    let (code, stderr) = toxiproxy("up");
    assert_eq!(code, 0, "{stderr}");
    assert!(answers());
    assert_eq!(toxiproxy("down").0, 0);
    assert!(!answers());
    assert_eq!(processes_in(&dir), Vec::<u32>::new(), "none left");
}
