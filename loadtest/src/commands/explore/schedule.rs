//! A fault schedule drawn from a seed, pure: the same seed and the same
//! faults on offer always give the same schedule, so that a divergence can
//! be run again from the seed alone.
//!
//! A schedule is a group (how many members, static or dynamic, which group
//! protocol) and a list of faults at moments of the run. The draw keeps
//! track of what the faults leave behind (a member stopped, a broker
//! down, a backup taken, the standby cut off), so that every step makes
//! sense where it stands: a restore only after a backup, a failover only
//! after the standby was cut off and at most once, a node started only
//! once killed. Every fault ends before the load does, and whatever is
//! still down then is brought back before the drain.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The first fault comes after this many seconds of load.
const FIRST_FAULT: f64 = 2.0;
/// Seconds between two faults, drawn uniformly in between.
const GAP: (f64, f64) = (1.5, 5.0);
/// Faults end at this share of the load, so that every partition receives
/// records after the last one (a database that went back is noticed by the
/// next batch of each partition).
const FAULTS_UNTIL: f64 = 0.75;
/// A member paused (SIGSTOP) for this many seconds past its session.
const PAUSE_PAST_SESSION: (f64, f64) = (1.0, 5.0);
/// Seconds without load (the faults go on meanwhile).
const QUIET: (f64, f64) = (10.0, 18.0);

/// Which faults the run can inject: those whose commands were given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offered {
    /// PostgreSQL can be restarted.
    pub restart_database: bool,
    /// The database can be backed up and put back to its backup.
    pub restore_database: bool,
    /// The standby can be cut off and the database failed over to it.
    pub failover_database: bool,
    /// Brokers can be killed and started (the count: 1, or a cluster's).
    pub brokers: u32,
    /// Both group protocols, else only the classic one.
    pub consumer_protocol: bool,
    /// A member's session, in seconds (what a pause must outlast).
    pub session_seconds: f64,
}

/// The group a schedule runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Classic,
    Consumer,
}

/// One fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// kill -9 of a member, started again at once.
    KillConsumer(usize),
    /// SIGTERM of a member: it leaves the group.
    StopConsumer(usize),
    /// A member stopped before starts again.
    StartConsumer(usize),
    /// SIGSTOP of a member for this many seconds, past its session: it
    /// wakes up as a zombie with work in hand.
    PauseConsumer(usize, f64),
    /// PostgreSQL restarted (fast).
    RestartDatabase,
    /// A base backup of the database, the one a later restore puts back.
    BackupDatabase,
    /// The database put back to its last backup under the running group.
    RestoreDatabase,
    /// The standby stops receiving WAL: it falls behind from here.
    CutReplica,
    /// kill -9 of the primary, the lagging standby promoted in its place.
    FailoverDatabase,
    /// kill -9 of a broker (node number, from 1).
    KillBroker(u32),
    /// The broker killed before starts again.
    StartBroker,
    /// Every member stopped, the positions moved back to the earliest
    /// offsets (`positions set`), every member started: a replay.
    Replay,
    /// `inventory-inbox maintain`, as the hourly cron job.
    Maintain,
    /// No load for this many seconds while the next faults come: members
    /// (re)started meanwhile are assigned partitions they write nothing to
    /// for a while, and a database that goes back then is seen only by the
    /// positions they read when assigned.
    Quiet(f64),
}

impl Fault {
    /// The fault's kind, for counting.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::KillConsumer(_) => "kill-consumer",
            Fault::StopConsumer(_) => "stop-consumer",
            Fault::StartConsumer(_) => "start-consumer",
            Fault::PauseConsumer(..) => "pause-consumer",
            Fault::RestartDatabase => "restart-database",
            Fault::BackupDatabase => "backup-database",
            Fault::RestoreDatabase => "restore-database",
            Fault::CutReplica => "cut-replica",
            Fault::FailoverDatabase => "failover-database",
            Fault::KillBroker(_) => "kill-broker",
            Fault::StartBroker => "start-broker",
            Fault::Replay => "replay",
            Fault::Maintain => "maintain",
            Fault::Quiet(_) => "quiet",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::KillConsumer(m) => write!(f, "kill -9 member {m}, start it"),
            Fault::StopConsumer(m) => write!(f, "stop member {m}"),
            Fault::StartConsumer(m) => write!(f, "start member {m}"),
            Fault::PauseConsumer(m, s) => write!(f, "SIGSTOP member {m} for {s:.1} s"),
            Fault::KillBroker(n) => write!(f, "kill -9 broker {n}"),
            Fault::Quiet(s) => write!(f, "no load for {s:.1} s"),
            other => f.write_str(other.kind()),
        }
    }
}

/// A fault and when it comes, in seconds from the start of the load.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub at: f64,
    pub fault: Fault,
}

/// What one seed gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub seed: u64,
    pub members: usize,
    /// Members have a `group.instance.id` (static membership).
    pub static_members: bool,
    pub protocol: Protocol,
    pub steps: Vec<Step>,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {}: {} {} members, {:?} protocol",
            self.seed,
            self.members,
            if self.static_members {
                "static"
            } else {
                "dynamic"
            },
            self.protocol
        )?;
        for step in &self.steps {
            writeln!(f, "  {:>6.1} s  {}", step.at, step.fault)?;
        }
        Ok(())
    }
}

/// What the faults so far have left behind.
#[derive(Default)]
struct State {
    stopped: Vec<usize>,
    broker_down: bool,
    backup: bool,
    replica_cut: bool,
    failed_over: bool,
    restored: bool,
    /// When the quiet spell ends, once one was drawn (one a run: the
    /// faults of a run come in its first three quarters, and the load has
    /// to come back after them).
    quiet_until: Option<f64>,
    /// Where the quiet spell stands.
    spell: Spell,
}

/// A quiet spell is where a member can be assigned partitions it writes
/// nothing to for a while; the draw leans to making that happen and then
/// putting the database back under it, and to leaving the members as they
/// are from there until the load comes back (a member assigned again would
/// read the positions afresh).
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Spell {
    #[default]
    Opened,
    /// A member was (re)started, stopped or replayed in the spell.
    MemberMoved,
    /// The database went back to its backup after that.
    PutBack,
}

impl Schedule {
    /// The schedule of `seed` for a load of `seconds`.
    pub fn draw(seed: u64, seconds: f64, offered: Offered) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed);
        let members = rng.gen_range(1..=3);
        let static_members = rng.gen_bool(0.5);
        let protocol = if offered.consumer_protocol && rng.gen_bool(0.5) {
            Protocol::Consumer
        } else {
            Protocol::Classic
        };
        let mut state = State::default();
        let mut steps = Vec::new();
        let mut at = FIRST_FAULT;
        while at < seconds * FAULTS_UNTIL {
            let fault = next_fault(&mut rng, &mut state, members, offered, at);
            let pause = match fault {
                Fault::PauseConsumer(_, s) => s,
                _ => 0.0,
            };
            steps.push(Step { at, fault });
            at += pause + rng.gen_range(GAP.0..GAP.1);
        }
        Schedule {
            seed,
            members,
            static_members,
            protocol,
            steps,
        }
    }

    /// How many faults of each kind, in the order kinds first came.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for step in &self.steps {
            match counts
                .iter_mut()
                .find(|(kind, _)| *kind == step.fault.kind())
            {
                Some((_, n)) => *n += 1,
                None => counts.push((step.fault.kind(), 1)),
            }
        }
        counts
    }
}

/// The next fault, among those that make sense where the run stands.
fn next_fault(
    rng: &mut StdRng,
    state: &mut State,
    members: usize,
    offered: Offered,
    at: f64,
) -> Fault {
    // A killed broker comes back before anything else on one broker (the
    // whole run waits for it), within a step or two on a cluster.
    if state.broker_down && (offered.brokers == 1 || rng.gen_bool(0.5)) {
        state.broker_down = false;
        return Fault::StartBroker;
    }
    let running: Vec<usize> = (0..members)
        .filter(|m| !state.stopped.contains(m))
        .collect();
    let spell = state
        .quiet_until
        .filter(|&until| at < until)
        .map(|_| state.spell);
    // Members move (a weight of 0 leaves them be) and the database goes
    // back, as the spell leans.
    let moving = |weight: u32| match spell {
        Some(Spell::Opened) => weight * 3,
        Some(Spell::PutBack) => 0,
        _ => weight,
    };
    let going_back = |weight: u32| match spell {
        Some(Spell::MemberMoved) => weight * 4,
        _ => weight,
    };
    let mut candidates: Vec<(u32, Fault)> = Vec::new();
    if let Some(&member) = pick(rng, &running) {
        candidates.push((moving(4), Fault::KillConsumer(member)));
        let pause =
            offered.session_seconds + rng.gen_range(PAUSE_PAST_SESSION.0..PAUSE_PAST_SESSION.1);
        let pause = Fault::PauseConsumer(member, (pause * 10.0).round() / 10.0);
        candidates.push((if spell.is_some() { 0 } else { 2 }, pause));
        // One member is always left running.
        if running.len() > 1 {
            candidates.push((moving(3), Fault::StopConsumer(member)));
        }
    }
    if let Some(&member) = pick(rng, &state.stopped) {
        candidates.push((moving(4), Fault::StartConsumer(member)));
    }
    if offered.restart_database {
        candidates.push((2, Fault::RestartDatabase));
    }
    // The standby follows the primary only until the database is put back
    // to a backup: no failover after a restore.
    if offered.restore_database {
        candidates.push((if state.backup { 2 } else { 3 }, Fault::BackupDatabase));
        if state.backup {
            candidates.push((going_back(2), Fault::RestoreDatabase));
        }
    }
    if offered.failover_database && !state.failed_over && !state.restored {
        if state.replica_cut {
            candidates.push((3, Fault::FailoverDatabase));
        } else {
            candidates.push((3, Fault::CutReplica));
        }
    }
    if offered.brokers > 0 && !state.broker_down {
        candidates.push((2, Fault::KillBroker(rng.gen_range(1..=offered.brokers))));
    }
    candidates.push((moving(1), Fault::Replay));
    candidates.push((1, Fault::Maintain));
    // A quiet spell comes after a backup where there are backups: the
    // load between them is what a restore in the spell takes back.
    if state.quiet_until.is_none() && (state.backup || !offered.restore_database) {
        let seconds = rng.gen_range(QUIET.0..QUIET.1);
        candidates.push((2, Fault::Quiet((seconds * 10.0).round() / 10.0)));
    }

    candidates.retain(|(weight, _)| *weight > 0);
    let total: u32 = candidates.iter().map(|(weight, _)| weight).sum();
    let mut draw = rng.gen_range(0..total);
    let fault = candidates
        .into_iter()
        .find(|(weight, _)| {
            if draw < *weight {
                true
            } else {
                draw -= weight;
                false
            }
        })
        .map(|(_, fault)| fault)
        .expect("the draw is below the weights' sum");
    if spell.is_some() {
        match fault {
            Fault::KillConsumer(_)
            | Fault::StopConsumer(_)
            | Fault::StartConsumer(_)
            | Fault::Replay => state.spell = Spell::MemberMoved,
            Fault::RestoreDatabase if state.spell == Spell::MemberMoved => {
                state.spell = Spell::PutBack
            }
            _ => {}
        }
    }
    match &fault {
        Fault::StopConsumer(m) => state.stopped.push(*m),
        Fault::StartConsumer(m) => state.stopped.retain(|s| s != m),
        // A replay stops and starts every member.
        Fault::Replay => state.stopped.clear(),
        Fault::BackupDatabase => state.backup = true,
        Fault::RestoreDatabase => state.restored = true,
        Fault::CutReplica => state.replica_cut = true,
        Fault::FailoverDatabase => state.failed_over = true,
        Fault::KillBroker(_) => state.broker_down = true,
        Fault::Quiet(seconds) => state.quiet_until = Some(at + seconds),
        _ => {}
    }
    fault
}

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.gen_range(0..items.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everything() -> Offered {
        Offered {
            restart_database: true,
            restore_database: true,
            failover_database: true,
            brokers: 3,
            consumer_protocol: true,
            session_seconds: 10.0,
        }
    }

    #[test]
    fn a_seed_gives_the_same_schedule_every_time() {
        for seed in 0..50 {
            assert_eq!(
                Schedule::draw(seed, 90.0, everything()),
                Schedule::draw(seed, 90.0, everything())
            );
        }
        assert_ne!(
            Schedule::draw(1, 90.0, everything()),
            Schedule::draw(2, 90.0, everything())
        );
    }

    #[test]
    fn every_step_makes_sense_where_it_stands() {
        for seed in 0..500 {
            let schedule = Schedule::draw(seed, 120.0, everything());
            let mut stopped = vec![false; schedule.members];
            let (mut backup, mut cut, mut failed_over, mut restored, mut down) =
                (false, false, false, false, false);
            let mut last = 0.0;
            for step in &schedule.steps {
                assert!(
                    step.at > last && step.at < 120.0 * FAULTS_UNTIL,
                    "{schedule}"
                );
                last = step.at;
                match step.fault {
                    Fault::StopConsumer(m) => {
                        assert!(!stopped[m], "{schedule}");
                        stopped[m] = true;
                        assert!(stopped.iter().any(|s| !s), "{schedule}");
                    }
                    Fault::StartConsumer(m) => {
                        assert!(stopped[m], "{schedule}");
                        stopped[m] = false;
                    }
                    Fault::KillConsumer(m) | Fault::PauseConsumer(m, _) => {
                        assert!(!stopped[m], "{schedule}")
                    }
                    Fault::Replay => stopped.iter_mut().for_each(|s| *s = false),
                    Fault::BackupDatabase => backup = true,
                    Fault::RestoreDatabase => {
                        assert!(backup, "{schedule}");
                        restored = true;
                    }
                    Fault::CutReplica => {
                        assert!(!cut && !restored, "{schedule}");
                        cut = true;
                    }
                    Fault::FailoverDatabase => {
                        assert!(cut && !failed_over && !restored, "{schedule}");
                        failed_over = true;
                    }
                    Fault::KillBroker(n) => {
                        assert!(!down && (1..=3).contains(&n), "{schedule}");
                        down = true;
                    }
                    Fault::StartBroker => {
                        assert!(down, "{schedule}");
                        down = false;
                    }
                    Fault::RestartDatabase | Fault::Maintain | Fault::Quiet(_) => {}
                }
            }
        }
    }

    #[test]
    fn a_quiet_spell_leaves_the_members_be_once_the_database_went_back() {
        let mut reached = 0;
        for seed in 0..500 {
            let schedule = Schedule::draw(seed, 120.0, everything());
            let Some((start, seconds)) = schedule.steps.iter().find_map(|s| match s.fault {
                Fault::Quiet(seconds) => Some((s.at, seconds)),
                _ => None,
            }) else {
                continue;
            };
            let in_spell: Vec<&Fault> = schedule
                .steps
                .iter()
                .filter(|s| s.at > start && s.at < start + seconds)
                .map(|s| &s.fault)
                .collect();
            let moves = |f: &&Fault| {
                matches!(
                    f,
                    Fault::KillConsumer(_)
                        | Fault::StopConsumer(_)
                        | Fault::StartConsumer(_)
                        | Fault::Replay
                )
            };
            assert!(
                !in_spell
                    .iter()
                    .any(|f| matches!(f, Fault::PauseConsumer(..))),
                "{schedule}"
            );
            let Some(moved) = in_spell.iter().position(moves) else {
                continue;
            };
            let Some(back) = in_spell[moved..]
                .iter()
                .position(|f| **f == Fault::RestoreDatabase)
            else {
                continue;
            };
            reached += 1;
            assert!(!in_spell[moved + back..].iter().any(moves), "{schedule}");
        }
        // The place the spell is for is reached by a good share of seeds.
        assert!(reached > 25, "{reached} of 500");
    }

    #[test]
    fn a_pause_outlasts_the_session() {
        let pauses: Vec<f64> = (0..200)
            .flat_map(|seed| Schedule::draw(seed, 120.0, everything()).steps)
            .filter_map(|step| match step.fault {
                Fault::PauseConsumer(_, seconds) => Some(seconds),
                _ => None,
            })
            .collect();
        assert!(!pauses.is_empty());
        assert!(pauses.iter().all(|&s| s > 10.0), "{pauses:?}");
    }

    #[test]
    fn only_the_faults_on_offer_are_drawn() {
        let nothing = Offered {
            restart_database: false,
            restore_database: false,
            failover_database: false,
            brokers: 0,
            consumer_protocol: false,
            session_seconds: 10.0,
        };
        for seed in 0..200 {
            let schedule = Schedule::draw(seed, 120.0, nothing);
            assert_eq!(schedule.protocol, Protocol::Classic);
            for step in &schedule.steps {
                assert!(
                    matches!(
                        step.fault,
                        Fault::KillConsumer(_)
                            | Fault::StopConsumer(_)
                            | Fault::StartConsumer(_)
                            | Fault::PauseConsumer(..)
                            | Fault::Replay
                            | Fault::Maintain
                            | Fault::Quiet(_)
                    ),
                    "{schedule}"
                );
            }
        }
    }

    #[test]
    fn a_broker_killed_on_one_broker_comes_back_next() {
        let one = Offered {
            brokers: 1,
            ..everything()
        };
        for seed in 0..300 {
            let steps = Schedule::draw(seed, 120.0, one).steps;
            for pair in steps.windows(2) {
                if matches!(pair[0].fault, Fault::KillBroker(_)) {
                    assert_eq!(pair[1].fault, Fault::StartBroker);
                }
            }
        }
    }
}
