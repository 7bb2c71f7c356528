//! Stopping, as one small type passed down. A [`Trigger`] is pulled once;
//! every clone of its [`Shutdown`] then says so, and wakes whatever waits
//! on it. `run` has two: the signal's (SIGTERM/SIGINT: the pipeline
//! drains) and the consumer's end (the background tasks stop).

use tokio::sync::watch;

/// A new shutdown, not asked yet, and the trigger that asks it.
pub fn channel() -> (Trigger, Shutdown) {
    let (sender, receiver) = watch::channel(false);
    (Trigger(sender), Shutdown(receiver))
}

/// Asks the shutdown, once and for all.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

impl Trigger {
    pub fn ask(&self) {
        self.0.send_replace(true);
    }
}

/// Whether shutdown was asked, and a way to wait for it.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    pub fn is_asked(&self) -> bool {
        *self.0.borrow()
    }

    /// Returns once shutdown is asked (at once if it was), or its trigger
    /// is gone (then nobody is left to ask it, and waiting would be for
    /// ever).
    pub async fn asked(&self) {
        let mut receiver = self.0.clone();
        let _ = receiver.wait_for(|asked| *asked).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_sees_the_ask_and_a_waiter_wakes() {
        let (trigger, shutdown) = channel();
        let other = shutdown.clone();
        assert!(!shutdown.is_asked());
        let waiter = tokio::spawn(async move { other.asked().await });
        trigger.ask();
        waiter.await.expect("the waiter wakes");
        assert!(shutdown.is_asked());
    }

    #[tokio::test]
    async fn a_dropped_trigger_ends_the_wait() {
        let (trigger, shutdown) = channel();
        drop(trigger);
        shutdown.asked().await;
        assert!(!shutdown.is_asked());
    }
}
