//! A cap on the load's goodput (`rpm --rate 50mbit`, and each step of
//! `--search 'rpm>=N'`): every load-generating connection of one direction
//! draws from one budget of bytes per second, so that the network carries
//! the offered load and no more, however many connections the draft's
//! method opens.
//!
//! Downloads are held on the client's side: a stream's next frame is read
//! only when the budget allows, HTTP/2 returns flow-control credit as it
//! is read, so the server sends at the budget's rate and what it sent
//! ahead waits in the client's buffers, not in the network's queues.
//! Uploads hand HTTP/2 a chunk only when the budget allows. Credit saved
//! while idle is capped at a few milliseconds' worth: a paced load must
//! not arrive as bursts at line rate, which would fill a FIFO the test is
//! trying not to fill.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Credit an idle direction keeps at most.
const BURST: Duration = Duration::from_millis(4);

/// One direction's budget.
pub struct Pace {
    bytes_per_s: f64,
    /// When the budget is next free: the sum of the times of what it let
    /// through.
    next: Mutex<Instant>,
}

impl Pace {
    /// A budget of `bits_per_s`.
    pub fn new(bits_per_s: f64) -> Pace {
        Pace {
            bytes_per_s: (bits_per_s / 8.0).max(1.0),
            next: Mutex::new(Instant::now()),
        }
    }

    /// When `n` bytes may go (now or later): they take their time out of
    /// the budget.
    pub fn reserve(&self, n: usize) -> Instant {
        let now = Instant::now();
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let start = (*next).max(now.checked_sub(BURST).unwrap_or(now));
        *next = start + Duration::from_secs_f64(n as f64 / self.bytes_per_s);
        start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_spaces_chunks_at_its_rate_and_banks_no_more_than_a_burst() {
        // 8 Mbit/s: 1 MB/s, so 10,000 bytes take 10 ms of it.
        let p = Pace::new(8e6);
        let t0 = Instant::now();
        let times: Vec<Instant> = (0..5).map(|_| p.reserve(10_000)).collect();
        for w in times.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                (gap.as_secs_f64() - 0.010).abs() < 1e-6,
                "{gap:?} between chunks"
            );
        }
        // The first went at once; the fifth 40 ms after it.
        assert!(times[0] <= t0 + Duration::from_millis(1));
        assert!(times[4] >= times[0] + Duration::from_millis(39));
        // After a long idle spell, no more than BURST is owed back.
        std::thread::sleep(Duration::from_millis(80));
        let now = Instant::now();
        let at = p.reserve(1);
        assert!(
            at + BURST + Duration::from_millis(2) >= now,
            "banked too much"
        );
    }
}
