//! Toxiproxy's HTTP API: the proxies put between a client and a server
//! (the database pair's endpoint). The server itself is installed, started
//! and stopped by `scripts/toxiproxy.sh`; this only talks to it, one
//! request per connection (HTTP/1.0: the answer ends when the connection
//! closes, never chunked).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

use crate::Result;

/// The API's address unless `TOXIPROXY_API` names another.
const DEFAULT_API: &str = "127.0.0.1:8474";
/// A server that takes the connection and never answers fails the request
/// instead of hanging its caller.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The API of one toxiproxy server (host:port).
pub struct Api {
    address: String,
}

impl Api {
    /// The server of `TOXIPROXY_API`, else 127.0.0.1:8474.
    pub fn from_env() -> Api {
        let address = std::env::var("TOXIPROXY_API").unwrap_or(DEFAULT_API.into());
        Api { address }
    }

    /// A proxy from `listen` to `upstream`, enabled.
    pub fn create(&self, name: &str, listen: &str, upstream: &str) -> Result<()> {
        let proxy = json!({"name": name, "listen": listen, "upstream": upstream, "enabled": true});
        self.request("POST", "/proxies", Some(proxy)).map(drop)
    }

    /// The address a proxy forwards to.
    pub fn upstream(&self, name: &str) -> Result<String> {
        upstream_of(&self.request("GET", &format!("/proxies/{name}"), None)?)
    }

    /// Points a proxy at another server; toxiproxy restarts the proxy for
    /// it, which cuts the connections through it.
    pub fn set_upstream(&self, name: &str, upstream: &str) -> Result<()> {
        let change = json!({ "upstream": upstream });
        let path = format!("/proxies/{name}");
        self.request("POST", &path, Some(change)).map(drop)
    }

    pub fn delete(&self, name: &str) -> Result<()> {
        self.request("DELETE", &format!("/proxies/{name}"), None)
            .map(drop)
    }

    /// Sends one request; the answer's body when its status is 2xx.
    fn request(&self, method: &str, path: &str, body: Option<Value>) -> Result<String> {
        let failed = |e: String| format!("toxiproxy {method} {path} on {}: {e}", self.address);
        let body = body.map_or(String::new(), |body| body.to_string());
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.address,
            body.len()
        );
        let mut answer = Vec::new();
        self.connect()
            .and_then(|mut stream| {
                stream.write_all(request.as_bytes())?;
                stream.read_to_end(&mut answer)
            })
            .map_err(|e| failed(e.to_string()))?;
        body_of(&String::from_utf8_lossy(&answer)).map_err(failed)
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let address =
            self.address.to_socket_addrs()?.next().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such address")
            })?;
        let stream = TcpStream::connect_timeout(&address, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        Ok(stream)
    }
}

/// The body of a complete HTTP answer whose status is 2xx; any other
/// status is an error carrying the body (toxiproxy says why in it).
fn body_of(answer: &str) -> Result<String> {
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or("the answer ended before its headers did")?;
    let status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
    match status {
        Some(200..=299) => Ok(body.to_owned()),
        Some(status) => Err(format!("HTTP {status}: {}", body.trim())),
        None => Err(format!("not an HTTP answer: {head}")),
    }
}

/// The `upstream` of a proxy as the API describes it.
fn upstream_of(proxy: &str) -> Result<String> {
    let proxy: Value =
        serde_json::from_str(proxy).map_err(|e| format!("a proxy that is not JSON: {e}"))?;
    proxy["upstream"]
        .as_str()
        .map(str::to_owned)
        .ok_or(format!("a proxy without an upstream: {proxy}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2xx_answer_gives_its_body_and_any_other_its_reason() {
        let created =
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n\r\n{\"name\":\"pair\"}";
        assert_eq!(body_of(created).unwrap(), "{\"name\":\"pair\"}");
        let conflict = "HTTP/1.1 409 Conflict\r\n\r\n{\"error\":\"proxy already exists\"}\n";
        let error = body_of(conflict).unwrap_err();
        assert!(error.contains("409") && error.contains("proxy already exists"));
        assert!(body_of("HTTP/1.1 200 OK\r\nContent-Length: 2").is_err());
        assert!(body_of("SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }

    #[test]
    fn a_proxys_upstream_is_read_from_its_description() {
        let proxy = r#"{"name":"pair","listen":"127.0.0.1:25433","upstream":"127.0.0.1:15433","enabled":true,"toxics":[]}"#;
        assert_eq!(upstream_of(proxy).unwrap(), "127.0.0.1:15433");
        assert!(upstream_of(r#"{"name":"pair"}"#).is_err());
        assert!(upstream_of("404 page not found").is_err());
    }
}
