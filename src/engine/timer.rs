//! A worker's wake-up with microsecond precision: a timerfd in its epoll
//! set.
//!
//! epoll_wait takes milliseconds, and mio rounds a timeout up to the next
//! whole one (mio's epoll selector), so an open loop's request due in
//! 0.2 ms went out up to a millisecond late: its latency from the intended
//! send time (coordinated-omission correction) carried that millisecond,
//! and a capacity search at `p99<=300us` could never meet its target on
//! an idle server (seen with memcache at 20k/s: corrected p99 1.19 ms,
//! actual 270 µs). The timerfd wakes the loop when the next timer is due;
//! epoll's own timeout stays as a backstop. Timer slack is cut to 1 µs on
//! the worker's thread while it paces (the default 50 µs is a latency
//! floor of its own).

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The timerfd and when it is armed for.
pub struct PreciseTimer {
    fd: OwnedFd,
    armed: Option<Instant>,
}

impl PreciseTimer {
    /// A timerfd registered with `registry` under `token` (readable when it
    /// expires).
    pub fn new(registry: &Registry, token: Token) -> std::io::Result<PreciseTimer> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor this process just opened and owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(PreciseTimer { fd, armed: None })
    }

    /// Wakes the loop at `at` (from `now`), unless already armed for it.
    pub fn arm(&mut self, at: Instant, now: Instant) {
        if self.armed == Some(at) {
            return;
        }
        let d = at
            .saturating_duration_since(now)
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        self.armed = (rc == 0).then_some(at);
    }

    /// When it is armed for (None: not armed).
    pub fn armed(&self) -> Option<Instant> {
        self.armed
    }

    /// Clears an expiry (called when its token is reported).
    pub fn drain(&mut self) {
        let mut ticks = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from our own fd.
        unsafe {
            libc::read(self.fd.as_raw_fd(), ticks.as_mut_ptr().cast(), ticks.len());
        }
        self.armed = None;
    }
}

/// How long before a due send the worker stops sleeping and busy-polls
/// (`--pacing hybrid`), learned from its own wake-ups: the second latest
/// of the last 64 (about their 97th percentile) plus 10 µs, at most 1 ms.
///
/// Why: a timer wake-up comes late by what the host takes to run a
/// sleeping thread again: 25 µs at the median on this AMD VM (idle, so
/// the vCPU halted), 15 µs with the other CPU busy, hundreds of µs on an
/// Intel VM of the same kind. An open loop that sleeps to each due time
/// sends that much late, and its latency from the due time (the
/// coordinated-omission correction) then measures the sender's own
/// wake-ups: a capacity search at `p99<=300us` found no rate in one run
/// and 1.6k/s in the next there, 54.7k/s with `--spin`. Waking early by
/// the lateness it sees and spinning the rest sends on time at the cost of
/// the spin, which is counted (`pacing_spin_ns`).
pub struct Lead {
    recent: [u32; 64],
    seen: usize,
    lead: Duration,
}

impl Default for Lead {
    fn default() -> Self {
        Lead {
            recent: [0; 64],
            seen: 0,
            lead: Self::INITIAL,
        }
    }
}

impl Lead {
    const INITIAL: Duration = Duration::from_micros(100);
    const MARGIN: Duration = Duration::from_micros(10);
    pub const MAX: Duration = Duration::from_millis(1);

    /// The lead now.
    pub fn get(&self) -> Duration {
        self.lead
    }

    /// A wake-up came `late` after the time it was armed for.
    pub fn observe(&mut self, late: Duration) {
        let n = self.recent.len();
        self.recent[self.seen % n] = late.as_nanos().min(u128::from(u32::MAX)) as u32;
        self.seen += 1;
        // Re-read every 8 wake-ups, once 16 are in.
        if self.seen >= 16 && self.seen.is_multiple_of(8) {
            let mut v: Vec<u32> = self.recent[..self.seen.min(n)].to_vec();
            v.sort_unstable();
            let second = v[v.len() - 2];
            self.lead = (Duration::from_nanos(u64::from(second)) + Self::MARGIN).min(Self::MAX);
        }
    }
}

/// Cuts this thread's timer slack to 1 ns (its sleeps end when asked, not
/// up to 50 µs later). Failure leaves the default: pacing is then coarser.
pub fn tight_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};

    #[test]
    fn the_lead_follows_the_late_wake_ups_and_stops_at_a_millisecond() {
        let mut l = Lead::default();
        assert_eq!(l.get(), Lead::INITIAL);
        for i in 0..64u64 {
            // Mostly 20 µs late, one in 16 at 200 µs.
            let late = if i % 16 == 0 { 200 } else { 20 };
            l.observe(Duration::from_micros(late));
        }
        assert_eq!(l.get(), Duration::from_micros(210));
        // A quieter host: the lead comes down once the slow ones age out.
        for _ in 0..64 {
            l.observe(Duration::from_micros(5));
        }
        assert_eq!(l.get(), Duration::from_micros(15));
        for _ in 0..64 {
            l.observe(Duration::from_millis(30));
        }
        assert_eq!(l.get(), Lead::MAX);
    }

    #[test]
    fn a_wake_up_due_in_200_us_comes_well_before_epolls_millisecond() {
        tight_slack();
        let mut poll = Poll::new().unwrap();
        let mut t = PreciseTimer::new(poll.registry(), Token(7)).unwrap();
        let mut events = Events::with_capacity(4);
        let mut late = Vec::new();
        for _ in 0..20 {
            let now = Instant::now();
            let at = now + Duration::from_micros(200);
            t.arm(at, now);
            poll.poll(&mut events, Some(Duration::from_millis(20)))
                .unwrap();
            let woke = Instant::now();
            assert!(
                events.iter().any(|e| e.token() == Token(7)),
                "no timer event"
            );
            t.drain();
            late.push(woke.saturating_duration_since(at));
        }
        late.sort();
        // The median wake-up is well under epoll's rounded millisecond.
        assert!(
            late[10] < Duration::from_micros(600),
            "median {:?} late",
            late[10]
        );
    }
}
