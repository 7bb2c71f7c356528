//! A CA of a test's own and the certificates it signs, made with the
//! `openssl` CLI in a directory of the test's (nothing fetched): the private
//! PostgreSQL's and the private Kafka's TLS.

use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `openssl ARGS` with `input` on its standard input; its output.
/// Fails the test when it fails.
pub fn openssl(args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("/usr/bin/openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl");
    child
        .stdin
        .take()
        .expect("openssl's stdin")
        .write_all(input)
        .expect("write to openssl");
    let output = child.wait_with_output().expect("wait for openssl");
    assert!(
        output.status.success(),
        "openssl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// A self-signed CA: `dir/NAME.crt` and `dir/NAME.key`, valid for a day.
pub fn make_ca(dir: &Path, name: &str, subject: &str) {
    let file = |ext: &str| dir.join(format!("{name}.{ext}")).display().to_string();
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            subject,
            "-keyout",
            &file("key"),
            "-out",
            &file("crt"),
        ],
        b"",
    );
}

/// `dir/NAME.crt` and its key `dir/NAME.key` (PKCS#8, unencrypted), for
/// `subject` with `extensions` (an `openssl x509 -extfile` line), signed by
/// the CA `dir/CA.crt`.
pub fn issue(dir: &Path, name: &str, subject: &str, extensions: &str, ca: &str) {
    let file = |name: &str, ext: &str| dir.join(format!("{name}.{ext}")).display().to_string();
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            subject,
            "-keyout",
            &file(name, "key"),
            "-out",
            &file(name, "csr"),
        ],
        b"",
    );
    let extfile = file(name, "ext");
    std::fs::write(&extfile, format!("{extensions}\n")).expect("write the extensions");
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            &file(name, "csr"),
            "-CA",
            &file(ca, "crt"),
            "-CAkey",
            &file(ca, "key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &extfile,
            "-out",
            &file(name, "crt"),
        ],
        b"",
    );
}
