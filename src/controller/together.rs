//! One window for several groups of a mixed test: each group's iteration
//! runs in a thread of its own (its own control connections, its own
//! client side), opens its flows, then waits here; the last to arrive
//! picks one start instant, far enough ahead for every group's agents to
//! hear of it. A group that fails to set up releases the others with an
//! error, and a group that ends early stops the rest, so the groups start
//! and stop together.
//!
//! A group may also have a lane of its own on that timeline (`Lane`): it
//! starts `offset` after the common instant (rrul's streams, after the
//! probes' idle phase), and its latency over ranges of its intervals is
//! kept apart (rrul's phases). Its flows are opened with everyone else's;
//! its agents hear of its start a moment before it, so a group still
//! waiting is stopped as easily as one that never arrived.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::error::ControllerError;
use crate::control::clock;

/// How long a group waits for the others to open their flows: the longest
/// setup a single test allows (30 s plus the flows' share) with room.
const ARRIVAL_LIMIT: Duration = Duration::from_secs(120);

#[derive(Default)]
struct State {
    arrived: usize,
    /// The largest lead any group asked for, nanoseconds.
    margin_ns: u64,
    /// The common start, in this process's monotonic clock.
    start_ns: Option<u64>,
    /// Why a group could not start: its error's text (the error stays
    /// that group's thread's).
    failed: Option<String>,
}

/// The rendezvous of `n` groups.
pub struct Together {
    n: usize,
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
}

impl Together {
    pub fn new(n: usize) -> Together {
        Together {
            n,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// A group's flows are open: wait for the others, then return the
    /// start instant (monotonic ns), at least `margin` ahead of the last
    /// arrival. Err names why another group could not start.
    pub fn arrive(&self, margin: Duration) -> Result<u64, ControllerError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.arrived += 1;
        st.margin_ns = st.margin_ns.max(margin.as_nanos() as u64);
        if st.arrived == self.n && st.failed.is_none() {
            st.start_ns = Some(clock::mono_ns() + st.margin_ns);
            self.cv.notify_all();
        }
        let until = Instant::now() + ARRIVAL_LIMIT;
        loop {
            if let Some(why) = &st.failed {
                return Err(ControllerError::OtherGroup(why.clone()));
            }
            if let Some(at) = st.start_ns {
                return Ok(at);
            }
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                let why = ControllerError::GroupsLate(ARRIVAL_LIMIT.as_secs());
                st.failed = Some(why.to_string());
                self.cv.notify_all();
                return Err(why);
            };
            st = self
                .cv
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// This group cannot start (`why`): every group still waiting is
    /// released with an error. After the start it only stops the others.
    pub fn fail(&self, why: &ControllerError) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.start_ns.is_none() && st.failed.is_none() {
            st.failed = Some(why.to_string());
        }
        self.cv.notify_all();
        drop(st);
        self.stop();
    }

    /// A group ended early: the others end their window too.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether some group asked every group to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A group's lane on the common timeline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lane {
    /// How long after the common start this group's timeline begins.
    pub offset: Duration,
    /// Ranges of this group's interval indices whose latency histograms
    /// an iteration returns merged, one per range (rrul's phases).
    pub phases: Vec<Range<usize>>,
}

/// A group's seat at the rendezvous: the rendezvous, and its lane.
#[derive(Clone, Copy)]
pub struct Meet<'a> {
    pub together: &'a Together,
    pub lane: &'a Lane,
}

/// Why a group with an offset did not start.
#[derive(Debug, PartialEq)]
pub enum NotStarted {
    /// Another group ended (or failed) before this one's start.
    OthersStopped,
    /// Ctrl-C before this group's start.
    Interrupted,
}

impl NotStarted {
    pub fn why(&self) -> &'static str {
        match self {
            NotStarted::OthersStopped => "another group ended before this group's start",
            NotStarted::Interrupted => {
                "interrupted (Ctrl-C) before this group's start: the others' results cover the window up to then"
            }
        }
    }
}

/// Waits until `until_ns` (monotonic), or until another group stops every
/// group or a Ctrl-C: a group with an offset waits here, its flows open,
/// before it tells its agents when it starts.
pub fn wait_for_lane(until_ns: u64, t: &Together) -> Result<(), NotStarted> {
    let until = clock::instant_at(until_ns);
    loop {
        if t.stopped() {
            return Err(NotStarted::OthersStopped);
        }
        if crate::engine::signals::test_interrupted() {
            return Err(NotStarted::Interrupted);
        }
        let Some(left) = until.checked_duration_since(Instant::now()) else {
            return Ok(());
        };
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// Waits until `start_ns` (monotonic) and returns it as an Instant.
pub fn sleep_until(start_ns: u64) -> Instant {
    let when = clock::instant_at(start_ns);
    let wait = when.saturating_duration_since(Instant::now());
    std::thread::sleep(wait);
    when
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_last_arrival_picks_one_start_for_all() {
        let t = Arc::new(Together::new(3));
        let hs: Vec<_> = (0..3u64)
            .map(|i| {
                let t = t.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20 * i));
                    t.arrive(Duration::from_millis(10 + i)).unwrap()
                })
            })
            .collect();
        let starts: Vec<u64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{starts:?}");
        assert!(starts[0] > clock::mono_ns() - 5_000_000);
    }

    #[test]
    fn a_lane_waits_for_its_start_unless_the_others_stop() {
        let t = Together::new(1);
        let at = clock::mono_ns() + 30_000_000;
        wait_for_lane(at, &t).unwrap();
        assert!(clock::mono_ns() >= at);
        let far = clock::mono_ns() + 60_000_000_000;
        t.stop();
        let began = Instant::now();
        assert_eq!(wait_for_lane(far, &t), Err(NotStarted::OthersStopped));
        assert!(began.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_failed_group_releases_the_others_and_stops_them() {
        let t = Arc::new(Together::new(2));
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.arrive(Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(30));
        t.fail(&ControllerError::Refused {
            addr: "192.0.2.7:7470".parse().unwrap(),
            message: "no".into(),
        });
        let e = h.join().unwrap().unwrap_err().to_string();
        assert_eq!(
            e,
            "another group did not start: the agent at 192.0.2.7:7470 refused: no"
        );
        assert!(t.stopped());
    }
}
