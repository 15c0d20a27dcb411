//! Receive polling (`--rx-poll`): a lone receiving thread that finds its
//! socket empty keeps trying for a few microseconds before it sleeps.
//!
//! Why: on a VM a receiver that sleeps between arrivals pays a halted
//! vCPU's exit and an inter-processor interrupt on every wake-up. Under bbr,
//! whose pacing delivers a loopback stream in small timed bursts, that
//! wake-up is most of the receiver's time: one stream measured 28 Gbit/s
//! sleeping and 47 Gbit/s polling up to 20 µs (bench/RESULTS.md,
//! "2026-11-27 (night)"). iperf3 and netperf sleep; a receiver that polls is
//! what a busy-polling server (SO_BUSY_POLL, DPDK) does, and its cost is
//! counted (`Counters::rx_poll_ns`) and shown beside the CPU figures.
//!
//! The poll backs off when it does not pay: a poll that ends without data
//! makes the next 1, 3, 7, ... up to 63 waits sleep at once, so a slow flow
//! (a 1 Gbit/s lab link, a small window) spends at most one poll in 64
//! sleeps, and a hit starts polling every wait again.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::model::sample::Counters;

/// The most consecutive waits a missed poll makes sleep without polling.
const MAX_SKIP: u32 = 63;

/// One receiving socket's poll state: how long a poll may last, how many
/// waits still sleep at once after misses, and counters not yet handed to
/// the worker.
#[derive(Debug)]
pub struct RxPoll {
    limit: Duration,
    /// A thread of its own (`--io threads`): after a poll, sleep in
    /// poll(2) at most this long (None: an event loop sleeps in epoll).
    pub sleep: Option<Duration>,
    /// Waits left that sleep without polling.
    skip: u32,
    /// Misses in a row (the next back-off is 2^misses - 1 waits).
    misses: u32,
    spent_ns: u64,
    polls: u64,
    hits: u64,
}

/// What to do when a read found the socket empty.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait {
    /// Try the read again now (still inside the poll).
    Retry,
    /// Sleep until the socket is readable.
    Sleep,
}

impl RxPoll {
    pub fn new(limit: Duration) -> RxPoll {
        RxPoll {
            limit,
            sleep: None,
            skip: 0,
            misses: 0,
            spent_ns: 0,
            polls: 0,
            hits: 0,
        }
    }

    /// A read found the socket empty: poll (retry) or sleep. `started` is
    /// when this wait's poll began (None at its first empty read); the
    /// caller keeps it across retries.
    pub fn empty(&mut self, started: &mut Option<Instant>, now: Instant) -> Wait {
        match *started {
            None if self.skip > 0 => {
                self.skip -= 1;
                Wait::Sleep
            }
            None => {
                *started = Some(now);
                self.polls += 1;
                Wait::Retry
            }
            Some(t) if now.duration_since(t) < self.limit => Wait::Retry,
            Some(t) => {
                self.spent_ns += now.duration_since(t).as_nanos() as u64;
                self.misses = (self.misses + 1).min(6);
                self.skip = ((1u32 << self.misses) - 1).min(MAX_SKIP);
                *started = None;
                Wait::Sleep
            }
        }
    }

    /// The poll begun at `started` found data (or an end) with the read
    /// that began at `found`.
    pub fn done(&mut self, started: Instant, found: Instant) {
        self.spent_ns += found.duration_since(started).as_nanos() as u64;
        self.hits += 1;
        self.misses = 0;
    }

    /// Moves what was counted since the last call into `c`.
    pub fn flush(&mut self, c: &mut Counters) {
        c.rx_poll_ns += std::mem::take(&mut self.spent_ns);
        c.rx_polls += std::mem::take(&mut self.polls);
        c.rx_poll_hits += std::mem::take(&mut self.hits);
    }
}

/// Sleeps until `fd` is readable (or has an error or end), at most `tick`:
/// true when it is, false on the timeout.
pub fn wait_readable(fd: RawFd, tick: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    let ms = tick.as_millis().clamp(1, i32::MAX as u128) as i32;
    loop {
        // SAFETY: `p` is one valid pollfd for the call.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, us: u64) -> Instant {
        base + Duration::from_micros(us)
    }

    #[test]
    fn a_poll_retries_until_its_limit_then_sleeps_and_backs_off() {
        let t0 = Instant::now();
        let mut p = RxPoll::new(Duration::from_micros(20));
        let mut started = None;
        assert_eq!(p.empty(&mut started, at(t0, 0)), Wait::Retry);
        assert_eq!(p.empty(&mut started, at(t0, 10)), Wait::Retry);
        assert_eq!(p.empty(&mut started, at(t0, 25)), Wait::Sleep);
        assert_eq!(started, None);
        // One miss: the next wait sleeps at once, the one after polls.
        assert_eq!(p.empty(&mut started, at(t0, 100)), Wait::Sleep);
        assert_eq!(p.empty(&mut started, at(t0, 200)), Wait::Retry);
        assert_eq!(p.empty(&mut started, at(t0, 230)), Wait::Sleep);
        // Two misses in a row: three waits sleep at once.
        for i in 0..3 {
            assert_eq!(
                p.empty(&mut started, at(t0, 300 + i)),
                Wait::Sleep,
                "wait {i}"
            );
        }
        assert_eq!(p.empty(&mut started, at(t0, 400)), Wait::Retry);
        let mut c = Counters::default();
        p.flush(&mut c);
        assert_eq!((c.rx_polls, c.rx_poll_hits), (3, 0));
        assert_eq!(c.rx_poll_ns, 25_000 + 30_000);
    }

    #[test]
    fn a_hit_counts_its_wait_and_ends_the_back_off() {
        let t0 = Instant::now();
        let mut p = RxPoll::new(Duration::from_micros(20));
        let mut started = None;
        for _ in 0..10 {
            // Miss after miss: the back-off grows to its ceiling.
            while p.empty(&mut started, t0) == Wait::Sleep {}
            assert_eq!(p.empty(&mut started, at(t0, 21)), Wait::Sleep);
        }
        assert_eq!(p.skip, MAX_SKIP);
        for _ in 0..MAX_SKIP {
            assert_eq!(p.empty(&mut started, t0), Wait::Sleep);
        }
        assert_eq!(p.empty(&mut started, t0), Wait::Retry);
        p.done(started.take().unwrap(), at(t0, 3));
        assert_eq!(p.misses, 0);
        // After a hit every wait polls again.
        assert_eq!(p.empty(&mut started, t0), Wait::Retry);
        p.done(started.take().unwrap(), at(t0, 1));
        let mut c = Counters::default();
        p.flush(&mut c);
        assert_eq!((c.rx_polls, c.rx_poll_hits), (12, 2));
        assert_eq!(c.rx_poll_ns, 10 * 21_000 + 3_000 + 1_000);
        p.flush(&mut c);
        assert_eq!(c.rx_polls, 12, "a flush hands each count over once");
    }
}
