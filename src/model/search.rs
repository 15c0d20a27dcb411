//! Capacity at a target as data: what `--search 'p99<=300us'` adds to a
//! spec (the target, the resolution, how many samples a step needs) and
//! the section it adds to a result, `search` (docs/result-schema.md).
//!
//! People size servers by "how much load at p99 <= X", not by peak
//! throughput (mutilate's `--search 95:1000`). A search runs the test at
//! offered rates (open loop) and keeps the highest one whose figure met
//! the target; the steps it ran are its points, so the curve of latency
//! against offered load comes with the answer.

use serde::{Deserialize, Serialize};

use super::error::{Invalid, ModelError};
use crate::units;

/// The figure a search holds to its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMetric {
    P50,
    P90,
    P99,
    P999,
    /// UDP: percent of requests (udp-rr) or datagrams (udp-stream) lost.
    LossPct,
    /// The responsiveness test's round trips per minute, at least the
    /// limit: the rates searched are the load's goodput each way, bits/s.
    Rpm,
}

impl SearchMetric {
    /// The quantile of a latency metric (None for loss).
    pub fn quantile(self) -> Option<f64> {
        match self {
            SearchMetric::P50 => Some(0.50),
            SearchMetric::P90 => Some(0.90),
            SearchMetric::P99 => Some(0.99),
            SearchMetric::P999 => Some(0.999),
            SearchMetric::LossPct | SearchMetric::Rpm => None,
        }
    }

    /// The target is a floor (`rpm>=1000`), not a ceiling.
    pub fn at_least(self) -> bool {
        self == SearchMetric::Rpm
    }

    /// The rates searched are bit rates (a load's goodput), not
    /// transactions or datagrams per second.
    pub fn bits(self) -> bool {
        self == SearchMetric::Rpm
    }

    pub fn name(self) -> &'static str {
        match self {
            SearchMetric::P50 => "p50",
            SearchMetric::P90 => "p90",
            SearchMetric::P99 => "p99",
            SearchMetric::P999 => "p999",
            SearchMetric::LossPct => "loss_pct",
            SearchMetric::Rpm => "rpm",
        }
    }
}

/// `METRIC<=VALUE`: a latency percentile at most VALUE (µs inside), or a
/// UDP loss at most VALUE percent; `rpm>=VALUE`: responsiveness at least
/// VALUE round trips per minute. Written and stored as text
/// (`"p99<=300us"`, `"rpm>=1000"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchTarget {
    pub metric: SearchMetric,
    /// µs for a percentile, percent for loss, round trips per minute for
    /// RPM.
    pub limit: f64,
}

impl SearchTarget {
    pub fn parse(s: &str) -> Result<SearchTarget, ModelError> {
        let form = || {
            ModelError::Form {
            input: s.into(),
            form: "METRIC<=VALUE (p50, p90, p99 or p999 with a time, or loss_pct with a percent: p99<=300us, p999<=2ms, loss_pct<=0.1), or rpm>=VALUE (rpm>=1000)",
        }
        };
        if let Some((m, v)) = s.split_once(">=") {
            if !m.trim().eq_ignore_ascii_case("rpm") {
                return Err(form());
            }
            let rpm: f64 = v.trim().parse().map_err(|_| form())?;
            if !(1.0..=1e7).contains(&rpm) {
                return Err(Invalid(format!(
                    "--search '{s}': an RPM floor is from 1 to 10,000,000 round trips per minute"
                ))
                .into());
            }
            return Ok(SearchTarget {
                metric: SearchMetric::Rpm,
                limit: rpm,
            });
        }
        let (m, v) = s.split_once("<=").ok_or_else(form)?;
        let metric = match m.trim().to_ascii_lowercase().as_str() {
            "p50" => SearchMetric::P50,
            "p90" => SearchMetric::P90,
            "p99" => SearchMetric::P99,
            "p999" | "p99.9" => SearchMetric::P999,
            "loss_pct" | "loss" => SearchMetric::LossPct,
            "rpm" => {
                return Err(Invalid(format!(
                    "--search '{s}': RPM is a floor, the more the better: rpm>=VALUE"
                ))
                .into())
            }
            _ => return Err(form()),
        };
        let v = v.trim();
        let limit = match metric {
            SearchMetric::LossPct => {
                let pct: f64 = v.trim_end_matches('%').trim().parse().map_err(|_| form())?;
                if !(pct > 0.0 && pct < 100.0) {
                    return Err(Invalid(format!(
                        "--search '{s}': a loss limit is above 0 and below 100 percent"
                    ))
                    .into());
                }
                pct
            }
            _ => {
                if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                    return Err(Invalid(format!(
                        "--search '{s}': give the latency its unit (300us, 1ms)"
                    ))
                    .into());
                }
                let d = units::parse_duration(v)?;
                let us = d.as_secs_f64() * 1e6;
                if !(1.0..=60e6).contains(&us) {
                    return Err(Invalid(format!(
                        "--search '{s}': a latency limit is from 1 µs to 60 s"
                    ))
                    .into());
                }
                us
            }
        };
        Ok(SearchTarget { metric, limit })
    }

    /// A value of its figure as it reads: "412 µs", "0.100%", "2421 RPM".
    pub fn fmt_value(&self, v: f64) -> String {
        match self.metric {
            SearchMetric::LossPct => format!("{v:.3}%"),
            SearchMetric::Rpm => format!("{v:.0} RPM"),
            _ => units::fmt_us(v),
        }
    }

    /// A rate its search offers, as it reads: per second, or bits/s (an
    /// RPM search's load each way).
    pub fn fmt_rate(&self, r: f64) -> String {
        if self.metric.bits() {
            units::fmt_bps(r)
        } else {
            units::fmt_rate(r)
        }
    }

    /// "p99 <= 300 µs", "rpm >= 1000 RPM".
    pub fn words(&self) -> String {
        format!(
            "{} {} {}",
            self.metric.name(),
            if self.metric.at_least() { ">=" } else { "<=" },
            self.limit_text()
        )
    }

    /// The limit in the figure's own words: "300 µs", "0.1%".
    pub fn limit_text(&self) -> String {
        match self.metric {
            SearchMetric::LossPct => format!("{}%", self.limit),
            SearchMetric::Rpm => format!("{} RPM", self.limit),
            _ => units::fmt_us(self.limit),
        }
    }
}

impl std::fmt::Display for SearchTarget {
    /// The form it is written in: `p99<=300us`, `loss_pct<=0.1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.metric {
            SearchMetric::LossPct => write!(f, "loss_pct<={}", self.limit),
            SearchMetric::Rpm => write!(f, "rpm>={}", self.limit),
            m => {
                let us = self.limit;
                if us >= 1e6 && (us / 1e6).fract() == 0.0 {
                    write!(f, "{}<={}s", m.name(), us / 1e6)
                } else if us >= 1e3 && (us / 1e3).fract() == 0.0 {
                    write!(f, "{}<={}ms", m.name(), us / 1e3)
                } else {
                    write!(f, "{}<={}us", m.name(), us)
                }
            }
        }
    }
}

impl Serialize for SearchTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SearchTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SearchTarget::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The default rate resolution: the search stops when the met and the
/// missed rate are within 2% of each other (mutilate's too).
pub const DEFAULT_RESOLUTION_PCT: f64 = 2.0;
/// A step's window when `-d` is not given and its samples need less.
pub const DEFAULT_MIN_WINDOW_S: f64 = 1.0;
/// No step's window is longer than this, whatever its samples need (the
/// step then records that it is short of them).
pub const MAX_WINDOW_S: f64 = 60.0;
/// An RPM search offers no less load than this, bits/s each way: below
/// it the network is not under working conditions.
pub const RPM_SLOWEST_BPS: f64 = 1e6;
/// No search runs more steps than this.
pub const MAX_STEPS: u32 = 20;
/// Below this fraction of the offered rate the generator fell behind: the
/// point misses whatever its latency (an open loop that cannot send when
/// it should measures the generator).
pub const ACHIEVED_FLOOR: f64 = 0.97;

/// What `--search` adds to a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSpec {
    pub target: SearchTarget,
    /// Stop when the missed rate is within this percent of the met one.
    pub resolution_pct: f64,
    /// Samples a step needs for its verdict: 100 / (1 - q) for a
    /// percentile q (100 beyond it), more when a confidence target was
    /// given; for loss, 100 / limit.
    pub samples: u64,
    /// A step's shortest window (`-d`, else 1 s).
    pub min_window_s: f64,
    /// The confidence level of a step's verdict, percent: a verdict whose
    /// interval holds the limit is within noise and the step repeats.
    pub level_pct: f64,
}

impl SearchSpec {
    /// `target` with its samples: at least 100 beyond the percentile; with
    /// a confidence target `(level, width)`, enough that the rank of the
    /// percentile is known within +/- width/2 percent of the tail.
    pub fn new(
        target: SearchTarget,
        resolution_pct: f64,
        min_window_s: Option<f64>,
        confidence: Option<(f64, f64)>,
    ) -> Result<SearchSpec, Invalid> {
        if !(0.1..=50.0).contains(&resolution_pct) {
            return Err(format!("--search-resolution {resolution_pct}%: from 0.1% to 50%").into());
        }
        let tail = match target.metric.quantile() {
            Some(q) => 1.0 - q,
            None => target.limit / 100.0,
        };
        // A responsiveness test gathers its own probes until its
        // trimmed means are stable: it needs no count from here.
        let mut samples = if target.metric == SearchMetric::Rpm {
            0.0
        } else {
            (100.0 / tail).ceil()
        };
        if let (Some((level, width)), false) = (confidence, target.metric == SearchMetric::Rpm) {
            let z = z_of(level);
            let w = width / 200.0;
            samples = samples.max((z * z * (1.0 - tail) / (w * w * tail)).ceil());
        }
        Ok(SearchSpec {
            target,
            resolution_pct,
            samples: samples as u64,
            min_window_s: min_window_s.unwrap_or(DEFAULT_MIN_WINDOW_S),
            level_pct: confidence.map_or(95.0, |c| c.0),
        })
    }

    /// The lowest rate whose step gathers its samples within the longest
    /// window: a search ramping down stops there (below it every window
    /// is cut short of its samples, and takes a minute).
    pub fn slowest_rate(&self) -> f64 {
        if self.target.metric == SearchMetric::Rpm {
            return RPM_SLOWEST_BPS;
        }
        1.1 * self.samples as f64 / MAX_WINDOW_S.max(self.min_window_s)
    }

    /// The window a step at `rate` needs for its samples (a tenth more
    /// for the windows' edges), between the shortest and the longest.
    pub fn window_s(&self, rate: f64) -> f64 {
        let need = 1.1 * self.samples as f64 / rate.max(1e-9);
        need.clamp(self.min_window_s, MAX_WINDOW_S.max(self.min_window_s))
    }
}

/// The two-sided normal quantile for a confidence level in percent (the
/// levels people write; others by the nearest below).
pub fn z_of(level_pct: f64) -> f64 {
    match level_pct {
        l if l >= 99.9 => 3.291,
        l if l >= 99.0 => 2.576,
        l if l >= 98.0 => 2.326,
        l if l >= 95.0 => 1.960,
        l if l >= 90.0 => 1.645,
        l if l >= 80.0 => 1.282,
        _ => 0.674,
    }
}

/// A step's searched figure with its confidence interval, computed where
/// the samples are (the histogram of the corrected latency, or the
/// loss counts): `summary.search_figure`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchFigure {
    /// µs, percent or RPM, as the target.
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// Latency samples, or datagrams/requests sent for loss, or probes
    /// for RPM.
    pub samples: u64,
    /// What the step achieved of its offered rate, where the kind says
    /// (rpm: the slower direction's goodput); else transactions or
    /// datagrams per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved: Option<f64>,
}

/// Where a step sat in the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchPhase {
    /// Closed loop: the most the generator gets through (no rate).
    Peak,
    /// Rates a factor of two apart, to bracket the capacity.
    Ramp,
    /// Halving the bracket down to the resolution.
    Bisect,
    /// The rate found, run once more: a capacity meets in two windows.
    Confirm,
}

impl SearchPhase {
    pub fn name(self) -> &'static str {
        match self {
            SearchPhase::Peak => "peak",
            SearchPhase::Ramp => "ramp",
            SearchPhase::Bisect => "bisect",
            SearchPhase::Confirm => "confirm",
        }
    }
}

/// One step of a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchPoint {
    pub step: u32,
    pub phase: SearchPhase,
    /// The offered and achieved rates are bits/s (an RPM search offers
    /// its load's goodput each way), not per second.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bits: bool,
    /// Offered rate, per second (None: the closed-loop peak).
    pub rate_per_s: Option<f64>,
    pub achieved_per_s: f64,
    pub window_s: f64,
    /// Iterations the step ran (more than one: its verdict was within noise).
    pub iterations: usize,
    pub samples: u64,
    /// Latency from the intended send time where the loop was open.
    pub p50_us: Option<f64>,
    pub p90_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// The searched figure and its confidence interval.
    pub figure: Option<SearchFigure>,
    pub met: bool,
    /// Why it met or missed, in words.
    pub why: String,
    /// Percent of the cores each end's workers could use (memcached's own
    /// threads for a service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
    /// The end whose cores were (nearly) all busy, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_bound: Option<String>,
    /// Open loops: the p99 of the waits in the latency (see
    /// `model::sample::Waits`): requests held back behind earlier ones,
    /// the sender's lateness, and how long requests waited for the agent
    /// to read them, responses for the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_read_delay_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_read_delay_p99_us: Option<f64>,
    /// When one end's own wake-ups set the step's tail: which, and by how
    /// much ("the agent's reads: read delay p99 210 µs of the 402 µs p99").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
}

/// What a search found: `result.search`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub target: SearchTarget,
    pub resolution_pct: f64,
    /// The highest offered rate that met the target (None: none did).
    pub capacity_per_s: Option<f64>,
    /// What was achieved there.
    pub achieved_per_s: Option<f64>,
    /// The closed-loop peak the ramp started from.
    pub peak_per_s: Option<f64>,
    /// The lowest offered rate that missed, above the capacity.
    pub missed_per_s: Option<f64>,
    /// Why the search ended.
    pub stopped: String,
    /// Where the load first missed, which end was CPU bound (none: the
    /// figure itself crossed the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_by: Option<String>,
    /// The group of a mixed test that was searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub points: Vec<SearchPoint>,
    /// Where the load first missed, the end whose own wake-ups set the
    /// tail, when one did (`SearchPoint::tail` of that step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_set_by: Option<String>,
}

impl SearchPoint {
    /// The step in a line, as it finishes (printed by `run` and by a
    /// study under its point's label): `search step  3 ramp   offered ...`.
    pub fn line(&self) -> String {
        let us = |v: Option<f64>| v.map_or("-".into(), units::fmt_us);
        let rate = self.rate_fmt();
        // An RPM step's figure is its RPM, not a latency percentile.
        let figures = match (&self.figure, self.bits) {
            (Some(f), true) => format!("rpm {:>9.0}", f.value),
            (None, true) => format!("rpm {:>9}", "-"),
            _ => format!("p50 {:>9}  p99 {:>9}", us(self.p50_us), us(self.p99_us)),
        };
        format!(
            "search step {:>2} {:<7} offered {:>9}  achieved {:>9}  {figures}  {}  {}",
            self.step,
            self.phase.name(),
            self.rate_per_s.map_or("closed".into(), rate),
            rate(self.achieved_per_s),
            if self.phase == SearchPhase::Peak {
                "    "
            } else if self.met {
                "met "
            } else {
                "MISS"
            },
            self.why
        )
    }
}

impl SearchPoint {
    /// How its rates read: bits/s or per second.
    pub fn rate_fmt(&self) -> fn(f64) -> String {
        if self.bits {
            units::fmt_bps
        } else {
            units::fmt_rate
        }
    }
}

impl SearchResult {
    /// The capacity in one sentence: "capacity at p99 <= 300 µs: 14.1k/s
    /// offered (14.1k/s achieved); 14.3k/s missed".
    pub fn sentence(&self) -> String {
        let s = self;
        let target = s.target.words();
        let rate = |v: f64| s.target.fmt_rate(v);
        let who = s
            .group
            .as_ref()
            .map_or(String::new(), |g| format!("group {g}: "));
        match s.capacity_per_s {
            Some(c) => {
                format!(
                    "{who}capacity at {target}: {} offered ({} achieved){}{}",
                    rate(c),
                    rate(s.achieved_per_s.unwrap_or(0.0)),
                    s.missed_per_s
                        .map_or(String::new(), |m| format!("; {} missed", rate(m))),
                    s.bound_by
                        .as_ref()
                        .map_or(String::new(), |b| format!(", where {b} was CPU bound")),
                ) + &s.tail_words()
            }
            None => format!("{who}no offered rate met {target}: {}", s.stopped) + &s.tail_words(),
        }
    }

    /// "; the tail there was set by the agent's reads: read delay p99 ...",
    /// or nothing.
    fn tail_words(&self) -> String {
        self.tail_set_by.as_ref().map_or(String::new(), |t| {
            format!("; the tail there was set by {t}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_as_written() {
        let t = SearchTarget::parse("p99<=300us").unwrap();
        assert_eq!((t.metric, t.limit), (SearchMetric::P99, 300.0));
        assert_eq!(t.to_string(), "p99<=300us");
        assert_eq!(
            SearchTarget::parse("p999 <= 2ms").unwrap().to_string(),
            "p999<=2ms"
        );
        assert_eq!(SearchTarget::parse("P50<=1s").unwrap().limit, 1e6);
        let l = SearchTarget::parse("loss_pct<=0.1").unwrap();
        assert_eq!((l.metric, l.limit), (SearchMetric::LossPct, 0.1));
        assert_eq!(l.to_string(), "loss_pct<=0.1");
        for bad in [
            "p99",
            "p98<=1ms",
            "p99<=300",
            "p99<=abc",
            "loss_pct<=0",
            "p99>=1ms",
        ] {
            assert!(SearchTarget::parse(bad).is_err(), "{bad}");
        }
        let back: SearchTarget = serde_json::from_str("\"p90<=1.5ms\"").unwrap();
        assert_eq!(back.limit, 1500.0);
    }

    #[test]
    fn an_rpm_floor_parses_searches_bit_rates_and_needs_no_sample_count() {
        let t = SearchTarget::parse("rpm>=1000").unwrap();
        assert_eq!((t.metric, t.limit), (SearchMetric::Rpm, 1000.0));
        assert!(t.metric.at_least() && t.metric.bits());
        assert_eq!(t.to_string(), "rpm>=1000");
        assert_eq!(t.limit_text(), "1000 RPM");
        assert_eq!(SearchTarget::parse(" RPM >= 250.5").unwrap().limit, 250.5);
        let back: SearchTarget = serde_json::from_str("\"rpm>=600\"").unwrap();
        assert_eq!(back, SearchTarget::parse("rpm>=600").unwrap());
        for bad in ["rpm<=1000", "rpm>=0", "rpm>=x", "p99>=1ms", "rpm>=", "rpm"] {
            assert!(SearchTarget::parse(bad).is_err(), "{bad}");
        }
        let s = SearchSpec::new(t, 2.0, Some(8.0), Some((95.0, 10.0))).unwrap();
        assert_eq!(s.samples, 0);
        assert_eq!(s.slowest_rate(), RPM_SLOWEST_BPS);
        for m in [SearchMetric::P99, SearchMetric::LossPct] {
            assert!(!m.at_least() && !m.bits());
        }
    }

    #[test]
    fn a_step_holds_a_hundred_samples_beyond_its_percentile() {
        let t = SearchTarget::parse("p99<=1ms").unwrap();
        let s = SearchSpec::new(t, 2.0, None, None).unwrap();
        assert_eq!(s.samples, 10_000);
        // 10k samples at 1000/s: 11 s; at 1M/s the 1 s floor.
        assert!((s.window_s(1000.0) - 11.0).abs() < 1e-9);
        assert_eq!(s.window_s(1e6), 1.0);
        assert_eq!(s.window_s(1.0), MAX_WINDOW_S);
        assert_eq!(s.window_s(s.slowest_rate()), MAX_WINDOW_S);
        assert!(s.window_s(s.slowest_rate() * 1.01) < MAX_WINDOW_S);
        let p999 = SearchSpec::new(SearchTarget::parse("p999<=1ms").unwrap(), 2.0, None, None);
        assert_eq!(p999.unwrap().samples, 100_000);
        // A confidence target asks for more: +/-10% of the tail at 95%.
        let c = SearchSpec::new(t, 2.0, None, Some((95.0, 20.0))).unwrap();
        assert_eq!(c.samples, 38_032);
        assert!(SearchSpec::new(t, 0.0, None, None).is_err());
    }
}
