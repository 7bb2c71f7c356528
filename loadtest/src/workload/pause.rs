//! Pausing the consumer process to inject a lag spike: SIGSTOP freezes it
//! without a rebalance or a restart (its group session outlives a short
//! pause), SIGCONT lets it find the backlog.
//!
//! Invariant: a process this module stopped is always continued, also when
//! the generator fails or is interrupted mid-pause ([`PausedProcess`] sends
//! SIGCONT on drop), so a load test never leaves a frozen consumer behind.

use anyhow::{bail, Context, Result};

/// Checks that `pid` names a process this user may signal.
pub fn check_signalable(pid: i32) -> Result<()> {
    if pid <= 0 {
        bail!("--pause-consumer must be a process id above 0, not {pid}");
    }
    signal(pid, 0).with_context(|| format!("--pause-consumer {pid}: cannot signal that process"))
}

/// A stopped process; continued by [`PausedProcess::resume`] or on drop.
pub struct PausedProcess {
    pid: i32,
    continued: bool,
}

impl PausedProcess {
    pub fn stop(pid: i32) -> Result<Self> {
        signal(pid, libc::SIGSTOP).with_context(|| format!("SIGSTOP {pid}"))?;
        Ok(PausedProcess {
            pid,
            continued: false,
        })
    }

    pub fn resume(mut self) -> Result<()> {
        self.continued = true;
        signal(self.pid, libc::SIGCONT).with_context(|| format!("SIGCONT {}", self.pid))
    }
}

impl Drop for PausedProcess {
    fn drop(&mut self) {
        if !self.continued {
            // Best effort: nothing more can be done if it fails here.
            let _ = signal(self.pid, libc::SIGCONT);
        }
    }
}

fn signal(pid: i32, signal: libc::c_int) -> std::io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
