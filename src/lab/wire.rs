//! Releasing held packets onto the link: when each is due, and never
//! faster than the link's rate, also when the emulator runs late.
//!
//! The schedule (`emulator::Link`) spaces departures by their wire time,
//! so an emulator that wakes on time never releases faster than the rate.
//! One that was descheduled for L ms (a busy host, a hypervisor's steal)
//! finds L ms of packets due at once. Released together they would make
//! the next second carry L ms more than the link can: a 1 Gbit/s link
//! measured 1.0046 of its rate with the host stalled 5 ms in every 20. A
//! real link behind a slow router does not catch up: the time it sat idle
//! is lost. So the wire keeps its own clock: a packet goes out only when
//! the wire has finished the ones before it (`free_at`, up to the release
//! window early), and the backlog of a stall leaves at the rate, as the
//! queue of a link that was idle would. Over any span T the link then
//! carries at most `rate x (T + window)` plus one packet.
//!
//! The time lost goes back into the link's model (`Link::pause`,
//! `Scheduler::pause`): later arrivals queue behind it, so the drop-tail
//! limit and CoDel see the backlog the stall left, and a flow backs off as
//! it would behind a slow router, instead of a queue the model cannot see
//! (measured without it: 25% of the time stalled, the held backlog grew to
//! 344 ms of delay with no drop).
//!
//! Counted per direction: `late` releases and the latest one, `paced`
//! packets the wire held back behind a stall's backlog, and `lost_us`, the
//! time the wire sat idle with a packet due (what the emulator's lateness
//! cost the link).

use std::collections::VecDeque;

use crate::model::lab::DirStats;

/// A release this much after its scheduled time counts as late.
pub const LATE_NS: u64 = 1_000_000;

/// A packet held for release: its queue id, when it is due (ns since the
/// emulator started) and its size on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub id: u32,
    pub at: u64,
    pub wire: u64,
}

/// How far the wire may fall behind and catch up at once: lateness up to
/// this (timer jitter, a short preemption) is made good by releasing the
/// backlog together, as before the wire existed; only longer stalls cost
/// the link time. Over any span T the link carries at most
/// `rate x (T + window + CATCH_UP_NS)`: at most 0.125% over a second.
pub const CATCH_UP_NS: u64 = 1_000_000;

/// The link's wire as releases fill it: a token bucket in time, refilled
/// by the clock, spent by each packet's wire time, `CATCH_UP_NS` deep, that
/// may be spent `window` ahead.
///
/// A release time marks the end of a packet's transmission (its last bit
/// leaving the bottleneck, plus the delay), so a packet of wire time `t`
/// may go at `now` when the wire finished the ones before it by `now - t`
/// (`end`, the end of the last one, plus `t`, at most `window` ahead), and
/// `end` trails the clock by at most `CATCH_UP_NS`. An emulator on time never waits for the wire: consecutive
/// releases of a busy link are exactly their wire times apart.
#[derive(Clone, Debug, Default)]
pub struct Wire {
    rate_bps: Option<u64>,
    /// When the wire finished the packets released so far, ns (virtual:
    /// it may trail the clock by up to the bucket's depth).
    end: u64,
    /// Remainder of `bits * 1e9 / rate`, so rounding never drifts the rate.
    carry: u128,
    /// Time the wire sat idle with a packet due, beyond what it catches
    /// up, ns.
    lost_ns: u64,
    /// The last packet counted as held back (counted once, however many
    /// wake-ups it waits).
    last_paced: Option<u32>,
}

impl Wire {
    /// A wire of `rate_bps` (None: no rate; only the schedule holds packets).
    pub fn new(rate_bps: Option<u64>) -> Wire {
        Wire {
            rate_bps,
            ..Wire::default()
        }
    }

    /// Wire time of `bytes`, ns (without the carry: for planning only).
    fn tx_ns(&self, bytes: u64) -> u64 {
        match self.rate_bps {
            Some(r) => (u128::from(bytes) * 8_000_000_000 / u128::from(r)) as u64,
            None => 0,
        }
    }

    /// The earliest time a packet of `bytes` may go, releasing up to
    /// `window` early; 0 without a rate.
    pub fn ready_at(&self, bytes: u64, window: u64) -> u64 {
        match self.rate_bps {
            Some(_) => (self.end + self.tx_ns(bytes)).saturating_sub(window),
            None => 0,
        }
    }

    /// Puts a packet of `wire` bytes, due at `due`, on the wire at `now`.
    fn send(&mut self, now: u64, due: u64, wire: u64) {
        let Some(rate) = self.rate_bps else { return };
        let work = u128::from(wire) * 8 * 1_000_000_000 + self.carry;
        let rate = u128::from(rate);
        let tx = u64::try_from(work / rate).unwrap_or(u64::MAX / 4);
        // Its transmission could have started when the wire was free and
        // it was due; the wire catches up CATCH_UP_NS of the time since:
        // beyond that, the link sat idle for good.
        let could = self.end.max(due.saturating_sub(tx));
        let floor = now.saturating_sub(CATCH_UP_NS);
        if floor > could {
            self.lost_ns += floor - could;
        }
        if floor > self.end {
            self.carry = 0;
            self.end = floor;
        } else {
            self.carry = work % rate;
        }
        self.end += tx;
    }

    /// Time lost so far, ns.
    pub fn lost_ns(&self) -> u64 {
        self.lost_ns
    }

    /// Time lost so far, µs.
    pub fn lost_us(&self) -> u64 {
        self.lost_ns / 1000
    }
}

/// Takes the packets that may go now off the front of `held` and returns
/// the last one's id, for one batch verdict; counts releases, lateness and
/// pacing in `stats`.
///
/// A packet may go when it is due by `now + window` (the packets that fall
/// due within the release window go out with the ones that are due
/// already, instead of each costing a wake-up of its own; see
/// `emulator::release_window_ns`) and the wire is ready for it.
pub fn take_due(
    held: &mut VecDeque<Held>,
    now: u64,
    window: u64,
    wire: &mut Wire,
    stats: &mut DirStats,
) -> Option<u32> {
    let mut last = None;
    while let Some(h) = take_one(held, now, window, wire, stats) {
        last = Some(h.id);
    }
    last
}

/// The front packet of `held` if it may go now (taken, counted), else None.
pub fn take_one(
    held: &mut VecDeque<Held>,
    now: u64,
    window: u64,
    wire: &mut Wire,
    stats: &mut DirStats,
) -> Option<Held> {
    let h = *held.front()?;
    if h.at > now.saturating_add(window) {
        return None;
    }
    if wire.ready_at(h.wire, window) > now {
        if wire.last_paced != Some(h.id) {
            wire.last_paced = Some(h.id);
            stats.paced += 1;
        }
        return None;
    }
    held.pop_front();
    wire.send(now, h.at, h.wire);
    stats.lost_us = wire.lost_us();
    count_release(stats, now, h.at);
    Some(h)
}

/// When the front packet of `held` may go (None: nothing held).
pub fn next_release(held: &VecDeque<Held>, wire: &Wire, window: u64) -> Option<u64> {
    held.front()
        .map(|h| h.at.max(wire.ready_at(h.wire, window)))
}

/// Counts a release at `now` of a packet due at `at`, and how late it was.
fn count_release(stats: &mut DirStats, now: u64, at: u64) {
    stats.released += 1;
    let late = now.saturating_sub(at);
    if late > LATE_NS {
        stats.late += 1;
    }
    stats.max_late_us = stats.max_late_us.max(late / 1000);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn held(v: &[(u32, u64)]) -> VecDeque<Held> {
        v.iter()
            .map(|&(id, at)| Held { id, at, wire: 1538 })
            .collect()
    }

    #[test]
    fn due_packets_leave_together_within_the_window() {
        let us = |v: u64| v * 1000;
        let mut h = held(&[(1, us(100)), (2, us(200)), (3, us(300)), (4, us(2000))]);
        let mut st = DirStats::default();
        let mut wire = Wire::new(None);
        // At 100 µs with a 150 µs window: 1 (due) and 2 (due at 200) go, 3 waits.
        assert_eq!(
            take_due(&mut h, us(100), us(150), &mut wire, &mut st),
            Some(2)
        );
        assert_eq!((h.len(), st.released, st.late), (2, 2, 0));
        // Nothing due yet: no verdict.
        assert_eq!(take_due(&mut h, us(120), us(150), &mut wire, &mut st), None);
        // Without a window only what is due leaves; 3 is 1.9 ms late.
        assert_eq!(take_due(&mut h, us(2200), 0, &mut wire, &mut st), Some(4));
        assert_eq!((st.released, st.late, st.max_late_us), (4, 1, 1900));
        assert!(h.is_empty());
    }

    /// A 1 Gbit/s link fed back to back with 1500 B packets for `span`,
    /// released by a loop that wakes at each next release (plus `jitter`)
    /// but sleeps through `stalls` (start, length); returns the release
    /// times and sizes, and the counters.
    fn drive(span: u64, jitter: u64, stalls: &[(u64, u64)]) -> (Vec<(u64, u64)>, DirStats) {
        // Arrivals faster than the rate keep the bottleneck busy: the
        // schedule (as `emulator::Link` makes it) releases 1538 B on the
        // wire every 12.304 µs after a 5 ms delay.
        let tx = 12_304;
        let mut h: VecDeque<Held> = (0..span / tx)
            .map(|k| Held {
                id: k as u32,
                at: 5 * MS + (k + 1) * tx,
                wire: 1538,
            })
            .collect();
        let window = 50_000;
        let mut wire = Wire::new(Some(1_000_000_000));
        let mut st = DirStats::default();
        let mut out = Vec::new();
        let mut now = 0;
        while let Some(next) = next_release(&h, &wire, window) {
            now = now.max(next) + jitter;
            if let Some(&(at, len)) = stalls
                .iter()
                .find(|(at, len)| (*at..at + len).contains(&now))
            {
                now = at + len;
            }
            while let Some(p) = take_one(&mut h, now, window, &mut wire, &mut st) {
                out.push((now, p.wire));
            }
        }
        (out, st)
    }

    /// The most bytes released in any `w` ns after a release, as bits/s.
    fn peak_bps(out: &[(u64, u64)], w: u64) -> f64 {
        let mut best = 0;
        for i in 0..out.len() {
            let sum: u64 = out[i + 1..]
                .iter()
                .take_while(|(t, _)| *t <= out[i].0 + w)
                .map(|(_, b)| b)
                .sum();
            best = best.max(sum);
        }
        best as f64 * 8e9 / w as f64
    }

    #[test]
    fn an_emulator_on_time_is_never_held_back_and_loses_nothing() {
        let (out, st) = drive(200 * MS, 3_000, &[]);
        assert_eq!((st.paced, st.lost_us), (0, 0), "{st:?}");
        // Late by up to the catch-up: still nothing lost.
        let (_, st) = drive(200 * MS, 900_000, &[]);
        assert_eq!((st.paced, st.lost_us), (0, 0), "{st:?}");
        let p = peak_bps(&out, 50 * MS);
        assert!(p <= 1e9 * 1.002 && p > 0.99e9, "{p}");
    }

    #[test]
    fn a_stalled_emulator_releases_its_backlog_at_the_rate_and_counts_the_loss() {
        // Asleep 5 ms in every 20: released at once, the backlog would make
        // the 50 ms after a stall carry 10% more than the link.
        let stalls: Vec<(u64, u64)> = (1..10).map(|k| (k * 20 * MS, 5 * MS)).collect();
        let (out, st) = drive(200 * MS, 3_000, &stalls);
        let p = peak_bps(&out, 50 * MS);
        // The rate, plus the bucket (window and catch-up) and one packet
        // over 50 ms; released at once it would be 1.1.
        let depth_ms = 0.05 + CATCH_UP_NS as f64 / 1e6;
        assert!(
            p <= 1e9 * (1.0 + depth_ms / 50.0) + 1538.0 * 8.0 / 0.05,
            "{p}"
        );
        assert!(st.paced > 100 && st.late > 100, "{st:?}");
        // Each stall cost the link its length less what the bucket caught up.
        let lost_ms = st.lost_us as f64 / 1000.0;
        let expect = 9.0 * (5.0 - depth_ms);
        assert!(
            (lost_ms - expect).abs() < 2.0,
            "lost {lost_ms} ms, expected {expect}: {st:?}"
        );
    }

    #[test]
    fn without_a_rate_only_the_schedule_holds_packets() {
        let mut wire = Wire::new(None);
        let mut st = DirStats::default();
        let mut h = held(&[(1, MS), (2, MS), (3, MS)]);
        assert_eq!(take_due(&mut h, 3 * MS, 0, &mut wire, &mut st), Some(3));
        assert_eq!((st.paced, st.lost_us, st.late), (0, 0, 3));
    }
}
