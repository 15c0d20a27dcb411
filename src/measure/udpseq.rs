//! What a UDP receiver learns from sequence numbers and send timestamps:
//! loss, duplicates, reordering and the RFC 3550 interarrival jitter, per
//! flow, counted as packets arrive (so each lands in the interval in which
//! it was received).
//!
//! Loss is counted from gaps: when sequence number s arrives after the
//! highest seen h, the s - h - 1 numbers between are counted as gaps (lost
//! for now); a missing number that arrives later is a late fill (reordered)
//! and takes one loss back. Over any window, loss = gaps - late fills. At
//! the edges: a packet in flight when the window opens counts in the window
//! (it arrives in it); one still in flight when it closes does not, and
//! neither does the gap it would open. Duplicates are recognised within the
//! last 1,024 sequence numbers and not counted as received.

/// How far back duplicates and late fills are recognised.
pub const HISTORY: u64 = 1024;

/// One flow's receive state.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    /// Highest sequence number seen + 1 (0: none yet).
    next: u64,
    /// Bit i: sequence number next - 1 - i arrived.
    seen: [u64; (HISTORY / 64) as usize],
    /// RFC 3550: the last transit time (arrival - send stamp), ns.
    last_transit: Option<i64>,
    /// RFC 3550 J, in ns, scaled by 16 (the estimator's fixed point).
    jitter16: u64,
}

/// What one arrival changed (added to the counters of the interval).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrival {
    /// A new packet (not a duplicate).
    pub fresh: bool,
    /// Sequence numbers skipped by this one.
    pub gaps: u64,
    /// It filled an earlier gap (arrived after a higher number).
    pub late: bool,
    pub duplicate: bool,
    /// |D(i-1, i)| of RFC 3550, ns (0 for the first packet).
    pub transit_delta_ns: u64,
}

impl SeqTracker {
    fn bit(&self, back: u64) -> bool {
        let (w, b) = ((back / 64) as usize, back % 64);
        self.seen[w] >> b & 1 == 1
    }

    fn set(&mut self, back: u64) {
        let (w, b) = ((back / 64) as usize, back % 64);
        self.seen[w] |= 1 << b;
    }

    /// Shifts the history by `n` numbers (newer numbers arrived).
    fn shift(&mut self, n: u64) {
        if n >= HISTORY {
            self.seen = Default::default();
            return;
        }
        let (words, bits) = ((n / 64) as usize, (n % 64) as u32);
        let len = self.seen.len();
        for i in (0..len).rev() {
            let src = i as isize - words as isize;
            let hi = if src >= 0 { self.seen[src as usize] } else { 0 };
            let lo = if bits > 0 && src >= 1 {
                self.seen[src as usize - 1] >> (64 - bits)
            } else {
                0
            };
            self.seen[i] = if bits > 0 { hi << bits | lo } else { hi };
        }
    }

    /// Takes packet `seq` sent at `sent_ns` (sender's clock) and received at
    /// `arrived_ns` (this host's clock): only differences of the two enter
    /// the jitter, so the clocks' offset cancels.
    pub fn arrive(&mut self, seq: u64, sent_ns: u64, arrived_ns: u64) -> Arrival {
        let mut a = Arrival::default();
        if seq >= self.next {
            a.gaps = seq - self.next;
            self.shift(seq + 1 - self.next);
            self.next = seq + 1;
            self.set(0);
            a.fresh = true;
        } else {
            let back = self.next - 1 - seq;
            if back >= HISTORY {
                // Too old to tell: a late fill is the likelier story.
                a.late = true;
                a.fresh = true;
            } else if self.bit(back) {
                a.duplicate = true;
                return a;
            } else {
                self.set(back);
                a.late = true;
                a.fresh = true;
            }
        }
        let transit = arrived_ns as i64 - sent_ns as i64;
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs();
            a.transit_delta_ns = d;
            // J += (|D| - J) / 16, in J*16 fixed point.
            self.jitter16 = self.jitter16 + d - (self.jitter16 + 8) / 16;
        }
        self.last_transit = Some(transit);
        a
    }

    /// The RFC 3550 interarrival jitter estimate, microseconds.
    pub fn jitter_us(&self) -> f64 {
        self.jitter16 as f64 / 16.0 / 1e3
    }

    /// Highest sequence number seen + 1.
    pub fn next(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(t: &mut SeqTracker, seqs: &[u64]) -> (u64, u64, u64, u64) {
        let (mut fresh, mut gaps, mut late, mut dup) = (0, 0, 0, 0);
        for &s in seqs {
            let a = t.arrive(s, s * 1000, s * 1000 + 50);
            fresh += a.fresh as u64;
            gaps += a.gaps;
            late += a.late as u64;
            dup += a.duplicate as u64;
        }
        (fresh, gaps, late, dup)
    }

    #[test]
    fn in_order_has_no_loss_and_no_jitter() {
        let mut t = SeqTracker::default();
        let seqs: Vec<u64> = (0..5000).collect();
        assert_eq!(feed(&mut t, &seqs), (5000, 0, 0, 0));
        assert_eq!(t.jitter_us(), 0.0);
        assert_eq!(t.next(), 5000);
    }

    #[test]
    fn gaps_late_fills_and_duplicates() {
        let mut t = SeqTracker::default();
        // 3 and 7 lost, 5 arrives late (after 6), 8 twice.
        let (fresh, gaps, late, dup) = feed(&mut t, &[0, 1, 2, 4, 6, 5, 8, 8, 9]);
        assert_eq!(fresh, 8);
        // 3, 5 and 7 were skipped when 4, 6 and 8 arrived.
        assert_eq!(gaps, 3);
        assert_eq!(late, 1);
        assert_eq!(dup, 1);
        // loss = gaps - late fills = numbers never received: 3 and 7.
        assert_eq!(gaps - late, 2);
    }

    #[test]
    fn a_late_packet_far_back_is_still_recognised() {
        let mut t = SeqTracker::default();
        let mut seqs: Vec<u64> = (0..3000).filter(|s| *s != 100).collect();
        seqs.push(100);
        seqs.push(100);
        let (fresh, gaps, late, dup) = feed(&mut t, &seqs);
        // 100 is 2,899 back: beyond the history, taken as a late fill once;
        // the second copy cannot be told from a fill either.
        assert_eq!(gaps, 1);
        assert!(late >= 1 && fresh >= 3000);
        assert_eq!(dup, 0);
        let mut t = SeqTracker::default();
        let mut seqs: Vec<u64> = (0..900).filter(|s| *s != 10).collect();
        seqs.extend([10, 10]);
        assert_eq!(feed(&mut t, &seqs), (900, 1, 1, 1));
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut t = SeqTracker::default();
        // Transit alternates 100 µs and 300 µs: |D| = 200 µs every packet;
        // J converges to 200 µs.
        for s in 0..2000u64 {
            let transit = if s % 2 == 0 { 100_000 } else { 300_000 };
            t.arrive(s, s * 1_000_000, s * 1_000_000 + transit);
        }
        assert!((t.jitter_us() - 200.0).abs() < 1.0, "{}", t.jitter_us());
    }

    #[test]
    fn history_shifts_across_words() {
        let mut t = SeqTracker::default();
        t.arrive(0, 0, 0);
        t.arrive(70, 0, 0);
        // 0 is 70 back: a duplicate of it is recognised.
        assert!(t.arrive(0, 0, 0).duplicate);
        assert!(t.arrive(5, 0, 0).late);
        assert!(t.arrive(5, 0, 0).duplicate);
        t.arrive(70 + 2000, 0, 0);
        assert!(!t.arrive(70, 0, 0).duplicate, "history is 1,024 deep");
    }
}
