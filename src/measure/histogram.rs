//! Latency histograms: one HDR histogram per worker (never per flow: each is
//! about 200 KiB), recorded in nanoseconds, merged at interval edges and at
//! the end. Summaries are reported in microseconds.

use super::MeasureError;
use crate::model::sample::{EncodedWaits, LatencySummary, Waits};
use hdrhistogram::Histogram;

/// Highest latency recorded: 100 s. Larger values are clamped, not lost.
const HIGHEST_NS: u64 = 100_000_000_000;

pub type Hist = Histogram<u64>;

pub fn new_hist() -> Hist {
    Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("valid histogram bounds")
}

/// Records a latency in nanoseconds, clamping into the histogram's range.
#[inline]
pub fn record_ns(h: &mut Hist, ns: u64) {
    h.saturating_record(ns.clamp(1, HIGHEST_NS));
}

pub fn summarize(h: &Hist) -> Option<LatencySummary> {
    if h.is_empty() {
        return None;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Some(LatencySummary {
        count: h.len(),
        mean: h.mean() / 1000.0,
        min: us(h.min()),
        p50: us(h.value_at_quantile(0.50)),
        p90: us(h.value_at_quantile(0.90)),
        p99: us(h.value_at_quantile(0.99)),
        p999: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    })
}

/// `h` at the fixed bounds of [`LatencyBuckets`] (None when empty).
pub fn buckets(h: &Hist) -> Option<crate::model::sample::LatencyBuckets> {
    if h.is_empty() {
        return None;
    }
    let mut le_us = Vec::new();
    let mut decade = 1.0;
    while decade <= 1e7 {
        for m in [1.0, 2.0, 5.0] {
            if m * decade <= 1e7 {
                le_us.push(m * decade);
            }
        }
        decade *= 10.0;
    }
    let cumulative = le_us
        .iter()
        .map(|us| h.count_between(0, (us * 1000.0) as u64))
        .collect();
    Some(crate::model::sample::LatencyBuckets {
        le_us,
        cumulative,
        count: h.len(),
        sum_us: h.mean() * h.len() as f64 / 1000.0,
    })
}

/// Adds `b` into `a`. Both come from `new_hist`, so the add cannot fail on range.
pub fn merge(a: &mut Hist, b: &Hist) {
    a.add(b).expect("histograms share bounds");
}

/// A histogram as text for the control protocol (HDR V2 encoding, hex):
/// an agent running clients sends its latencies so the controller merges
/// them exactly instead of averaging percentiles.
pub fn encode(h: &Hist) -> String {
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .expect("serializing into memory");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`encode`], re-ranged to [`new_hist`]'s bounds.
pub fn decode(text: &str) -> Result<Hist, MeasureError> {
    use hdrhistogram::serialization::Deserializer;
    if !text.len().is_multiple_of(2) || text.len() > 8 << 20 {
        return Err(MeasureError::HistogramLength);
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(MeasureError::HistogramHex)?;
    let h: Hist = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(MeasureError::HistogramUnreadable)?;
    let mut out = new_hist();
    out.add(&h).map_err(MeasureError::HistogramRange)?;
    Ok(out)
}

/// A histogram an older peer did not send (empty text): an empty one.
fn decode_or_empty(text: &str) -> Result<Hist, MeasureError> {
    if text.is_empty() {
        Ok(new_hist())
    } else {
        decode(text)
    }
}

/// What one end's own scheduling added, recorded beside its latency (open
/// loops): the sender's lateness against each request's due time, and how
/// long each message waited in this end's socket before it was read.
pub struct WaitHists {
    pub send_late: Hist,
    pub read_delay: Hist,
    /// How long each request was held back from its due time until a
    /// slot was free (`--outstanding` all in flight): its queue behind
    /// earlier requests.
    pub held: Hist,
    /// Each transaction's latency from its due time less its sender's own
    /// lateness (held + from the send): what the system under test
    /// imposed, whatever the generator's host did.
    pub net: Hist,
}

impl Default for WaitHists {
    fn default() -> Self {
        WaitHists {
            send_late: new_hist(),
            read_delay: new_hist(),
            held: new_hist(),
            net: new_hist(),
        }
    }
}

impl WaitHists {
    pub fn reset(&mut self) {
        self.send_late.reset();
        self.read_delay.reset();
        self.held.reset();
        self.net.reset();
    }

    pub fn merge(&mut self, o: &WaitHists) {
        merge(&mut self.send_late, &o.send_late);
        merge(&mut self.read_delay, &o.read_delay);
        merge(&mut self.held, &o.held);
        merge(&mut self.net, &o.net);
    }

    pub fn is_empty(&self) -> bool {
        self.send_late.is_empty() && self.read_delay.is_empty() && self.held.is_empty()
    }

    pub fn encode(&self) -> EncodedWaits {
        EncodedWaits {
            send_late: encode(&self.send_late),
            read_delay: encode(&self.read_delay),
            held: encode(&self.held),
            net: encode(&self.net),
        }
    }

    pub fn decode(e: &EncodedWaits) -> Result<WaitHists, MeasureError> {
        Ok(WaitHists {
            send_late: decode(&e.send_late)?,
            read_delay: decode(&e.read_delay)?,
            held: decode_or_empty(&e.held)?,
            net: decode_or_empty(&e.net)?,
        })
    }

    /// The summary of a client's (`client`) and an agent's waits; None
    /// when neither measured any.
    pub fn summary(client: &WaitHists, agent: &WaitHists) -> Option<Waits> {
        let w = Waits {
            net_us: summarize(&client.net),
            held_us: summarize(&client.held),
            send_late_us: summarize(&client.send_late),
            client_read_delay_us: summarize(&client.read_delay),
            agent_read_delay_us: summarize(&agent.read_delay),
        };
        (!w.is_empty()).then_some(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_histograms_come_back_equal() {
        let mut h = new_hist();
        for v in [1_000u64, 25_000, 25_001, 3_000_000, 99_000_000_000] {
            record_ns(&mut h, v);
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
        assert!(decode("zz").is_err());
        assert!(decode("abc").is_err());
        assert!(decode("00").is_err());
    }

    #[test]
    fn merge_equals_single_recording() {
        let mut one = new_hist();
        let mut w1 = new_hist();
        let mut w2 = new_hist();
        for i in 1..=10_000u64 {
            let v = i * 997 % 50_000 + 1_000;
            record_ns(&mut one, v);
            if i % 3 == 0 {
                record_ns(&mut w1, v)
            } else {
                record_ns(&mut w2, v)
            }
        }
        let mut merged = new_hist();
        merge(&mut merged, &w1);
        merge(&mut merged, &w2);
        assert_eq!(summarize(&merged), summarize(&one));
        let s = summarize(&merged).unwrap();
        assert_eq!(s.count, 10_000);
        assert!(s.p50 < s.p99 && s.p99 <= s.max);
        // p50 of a near-uniform 1..51 µs spread is about 26 µs.
        assert!((s.p50 - 26.0).abs() < 1.5, "{}", s.p50);
    }

    #[test]
    fn empty_is_none_and_huge_is_clamped() {
        let mut h = new_hist();
        assert!(summarize(&h).is_none());
        record_ns(&mut h, u64::MAX);
        record_ns(&mut h, 0);
        assert_eq!(h.len(), 2);
    }
}
