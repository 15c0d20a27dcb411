//! `linerate run rrul`: flent's Realtime Response Under Load, built in. It
//! is a composite (`controller::mix` runs its groups) whose four groups have lanes on one
//! timeline (`controller::together::Lane`):
//!
//! - `rr` and `udp-rr`: the probes, 64/64 B open loop at `--probe-rate`
//!   (20/s), from the common start to the end; each keeps its latency per
//!   phase apart (idle, ramp, loaded), merged from whole intervals'
//!   histograms, so the phases' percentiles are exact;
//! - `up` and `down`: `--streams` (4) TCP streams each way (stream tx and
//!   rx), starting `--idle` (3 s) after the common start.
//!
//! One probe of each kind runs over the whole timeline (a continuous
//! series, as flent's ping), rather than one per phase: the phases split
//! its histogram at interval edges instead, which is why the idle phase and
//! the ramp are whole intervals. The ramp (`--warmup`, 1 s by default) is
//! the streams' slow start: the series shows it, the loaded phase's
//! percentiles and throughput leave it out. flent also ends with an idle
//! phase; rrul stops when the streams do.
//!
//! The probes' round trips are taken from each request's actual send, not
//! from its due time: an epoll worker wakes up to a millisecond late for a
//! due request (timer granularity), which on loopback would be most of the
//! idle figure and is the engine's, not the path's; with
//! `params::PROBE_OUTSTANDING` (32) requests allowed in flight, a
//! probe waits for an earlier one only past a 1.6 s round trip at 20/s
//! (each group's own summary in `groups[]` keeps the corrected figures).

use super::group::{self, Group, GroupError, Mixed};
use super::kind::Composite;
use super::kind::Kind;
use super::RateColumn;
use crate::measure::histogram::{self, new_hist, Hist};
use crate::model::options::{Rate, Secs, Size, TestOptions};
use crate::model::points::{KeyPoint, PointView};
use crate::model::result::{Iteration, TestInterval, TestResult};
use params::{
    LatencyUnderLoad, Phase, PointLatency, ProbeLatency, RrulSpec, SeriesPoint, FIGURES, SECTION,
};

pub mod charts;
pub mod keypoints;
pub mod metrics;
pub mod options;
pub mod params;
pub mod text;
use crate::model::sample::LatencySummary;
use crate::model::spec::{self, Direction, TestSpec, Workload};
use crate::model::Invalid;

/// The groups in the order `groups` makes them: the probes (the TCP one
/// first, the headline), then the streams up and down.
pub const PROBES: [Workload; 2] = [super::rr::NAME, super::udp_rr::NAME];
const UP: usize = 2;
const DOWN: usize = 3;

/// rrul's own spec from its options (what the result stores).
pub fn spec_of(opts: &TestOptions, local: bool) -> Result<TestSpec, Invalid> {
    let mut o = opts.clone();
    o.run.workload = Some(NAME);
    let spec = super::build(&o, local)?;
    Rrul.rules(&spec)?;
    Ok(spec)
}

/// The groups of an rrul with these options: the probes over the whole
/// timeline with their phases, the streams after the idle phase. The other
/// options (where it runs, --cc, --rcvbuf, --message, ...) apply to every
/// group that takes them.
pub fn groups(opts: &TestOptions, local: bool) -> Result<Vec<Group>, GroupError> {
    let spec = spec_of(opts, local)?;
    let r = RrulSpec::of(&spec).map_err(Invalid::from)?;
    let (ramp, loaded) = (spec.warmup_s, spec.duration_s);
    let total = r.idle_s + ramp + loaded;
    let phases = r.phases(ramp, loaded);
    let mut common = opts.clone();
    common.own.put(&options::RrulOptions::default());
    common.run.label = None;
    common.run.groups = None;
    common.run.warmup = Some(Secs(0.0));
    let mut out = Vec::new();
    for w in PROBES {
        let mut o = common.clone();
        o.run.workload = Some(w);
        o.run.flows = Some(1);
        o.load.rate = Some(Rate::PerSecond(r.probe_rate));
        o.exchange.request = Some(Size(spec.request));
        o.exchange.response = Some(Size(spec.response));
        o.exchange.outstanding = Some(spec.outstanding);
        o.run.duration = Some(crate::model::options::Length::Secs(total));
        // What a probe does not take (the streams' options).
        o.stream.message = None;
        o.stream.zerocopy = None;
        if super::facts(w).datagrams {
            o.socket.window = None;
            o.socket.read_size = None;
        } else {
            o.exchange.timeout = None;
            // Probes are sent 50 ms apart with up to 32 in flight: under
            // load, with Nagle on, each small request would wait for the
            // ACK of the one before (a round trip of the loaded path),
            // and the TCP probe would measure its own queue (measured
            // through 20 Mbit/s with a 1 MiB queue: p50 510 ms against
            // udp-rr's 372).
            o.socket.nodelay = Some(true);
        }
        let command = format!(
            "{} --rate {} --request {} --response {}",
            w.name(),
            r.probe_rate,
            spec.request,
            spec.response
        );
        let mut g = group(w.name(), command, &o, local)?;
        g.phases = phases.clone();
        out.push(g);
    }
    for (name, direction) in [("up", Direction::Tx), ("down", Direction::Rx)] {
        let mut o = common.clone();
        o.run.workload = Some(super::stream::NAME);
        o.run.flows = Some(r.streams);
        o.stream.direction = Some(direction);
        o.run.duration = Some(crate::model::options::Length::Secs(ramp + loaded));
        o.exchange.request = None;
        o.exchange.response = None;
        o.exchange.outstanding = None;
        o.exchange.timeout = None;
        let command = format!(
            "stream --flows {} --direction {}",
            r.streams,
            direction.name()
        );
        let mut g = group(name, command, &o, local)?;
        g.offset_s = r.idle_s;
        out.push(g);
    }
    group::check(&out)?;
    Ok(out)
}

/// One group, named in its errors.
fn group(name: &str, command: String, o: &TestOptions, local: bool) -> Result<Group, Invalid> {
    let spec =
        super::build(o, local).map_err(|e| Invalid(format!("rrul's {name} ({command}): {e}")))?;
    Ok(Group::new(name.into(), command, spec))
}

/// rrul's result from its `groups` (from `groups`) as they ran on one
/// window: the mix's, with `spec` as its own and `latency_under_load` in
/// its summary and in each iteration.
fn finish(spec: &TestSpec, groups: &[Group], mixed: Mixed) -> Result<TestResult, GroupError> {
    if groups.len() != 4 || RrulSpec::of(spec).is_err() {
        return Err(GroupError::NotItsGroups("rrul"));
    }
    let mut r = mixed.result;
    r.spec = spec.clone();
    r.summary.workload = spec.workload.name().into();
    r.summary.direction = "both".into();
    let n = r.iterations.len();
    let mut each = Vec::new();
    for k in 0..n {
        let its: Vec<Option<&Iteration>> = r.groups.iter().map(|g| g.iterations.get(k)).collect();
        let hists: Vec<&[Hist]> = mixed
            .phase_hists
            .iter()
            .map(|h| h.get(k).map_or(&[][..], |v| &v[..]))
            .collect();
        each.push(under_load(spec, groups, &its, &hists));
    }
    // Over every iteration: each probe's phases merged, rates averaged.
    let merged: Vec<Vec<Hist>> = mixed
        .phase_hists
        .iter()
        .map(|per_it| {
            let mut out: Vec<Hist> = Vec::new();
            for hs in per_it {
                for (i, h) in hs.iter().enumerate() {
                    if out.len() <= i {
                        out.push(new_hist());
                    }
                    histogram::merge(&mut out[i], h);
                }
            }
            out
        })
        .collect();
    let refs: Vec<&[Hist]> = merged.iter().map(|v| &v[..]).collect();
    let none: Vec<Option<&Iteration>> = vec![None; groups.len()];
    let mut total = under_load(spec, groups, &none, &refs);
    if !each.is_empty() {
        let m = each.len() as f64;
        total.up_bps = each.iter().map(|l| l.up_bps).sum::<f64>() / m;
        total.down_bps = each.iter().map(|l| l.down_bps).sum::<f64>() / m;
        for (i, p) in total.probes.iter_mut().enumerate() {
            p.idle_lost = each.iter().map(|l| l.probes[i].idle_lost).sum();
            p.loaded_lost = each.iter().map(|l| l.probes[i].loaded_lost).sum();
        }
        total.series = mean_series(&each);
    }
    for (it, l) in r.iterations.iter_mut().zip(each) {
        it.own.set(FIGURES, &l);
    }
    r.summary.own.set(FIGURES, &total);
    Ok(r)
}

/// Where an interval of group `g` sits on the common timeline: its
/// middle, seconds since the common start.
fn middle(g: &Group, i: &TestInterval) -> f64 {
    g.offset_s + g.spec.warmup_s + (i.start_s + i.end_s) / 2.0
}

/// The intervals of `it` (of group `g`) in phase `name`.
fn in_phase<'a>(
    l: &'a LatencyUnderLoad,
    g: &'a Group,
    it: Option<&'a Iteration>,
    name: &'a str,
) -> impl Iterator<Item = &'a TestInterval> + 'a {
    it.into_iter()
        .flat_map(|it| it.intervals.iter())
        .filter(move |i| l.phase_at(middle(g, i)).is_some_and(|p| p.name == name))
}

/// One iteration's (or, with no iterations and merged histograms, the
/// summary's) latency under load.
fn under_load(
    spec: &TestSpec,
    groups: &[Group],
    its: &[Option<&Iteration>],
    hists: &[&[Hist]],
) -> LatencyUnderLoad {
    let r = RrulSpec::of(spec).unwrap_or_default();
    let mut l = LatencyUnderLoad {
        streams: r.streams,
        probe_rate: r.probe_rate,
        idle_s: r.idle_s,
        ramp_s: spec.warmup_s,
        loaded_s: spec.duration_s,
        phases: r.phases(spec.warmup_s, spec.duration_s),
        ..Default::default()
    };
    for (g, w) in PROBES.iter().enumerate() {
        let group = &groups[g];
        let phase = |name: &str| -> Option<LatencySummary> {
            let i = group.phases.iter().position(|p| p.name == name)?;
            histogram::summarize(hists.get(g)?.get(i)?)
        };
        let lost = |name: &str| -> u64 {
            in_phase(&l, group, its[g], name)
                .map(|i| i.counters.client.timeouts)
                .sum()
        };
        let p = ProbeLatency {
            probe: w.name().into(),
            group: group.name.clone(),
            idle_us: phase("idle"),
            ramp_us: phase("ramp"),
            loaded_us: phase("loaded"),
            idle_lost: lost("idle"),
            loaded_lost: lost("loaded"),
        };
        l.probes.push(p);
    }
    let head = &l.probes[0];
    let pick = |s: &Option<LatencySummary>, f: fn(&LatencySummary) -> f64| s.as_ref().map(f);
    l.idle_p50_us = pick(&head.idle_us, |s| s.p50);
    l.idle_p99_us = pick(&head.idle_us, |s| s.p99);
    l.loaded_p50_us = pick(&head.loaded_us, |s| s.p50);
    l.loaded_p99_us = pick(&head.loaded_us, |s| s.p99);
    l.added_p50_us = l.loaded_p50_us.zip(l.idle_p50_us).map(|(a, b)| a - b);
    l.added_p99_us = l.loaded_p99_us.zip(l.idle_p99_us).map(|(a, b)| a - b);
    let loaded_bps = |g: usize| -> f64 {
        let (bytes, secs) = in_phase(&l, &groups[g], its[g], "loaded")
            .fold((0u64, 0.0), |(b, s), i| {
                (b + i.bytes, s + (i.end_s - i.start_s))
            });
        if secs > 0.0 {
            bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    };
    let (up, down) = (loaded_bps(UP), loaded_bps(DOWN));
    l.up_bps = up;
    l.down_bps = down;
    l.series = series(&l, groups, its);
    l
}

/// The timeline, one point per interval of the first probe (which covers
/// it all): each probe's round trips and the streams' throughput there.
fn series(l: &LatencyUnderLoad, groups: &[Group], its: &[Option<&Iteration>]) -> Vec<SeriesPoint> {
    let Some(first) = its[0] else {
        return Vec::new();
    };
    let at = |g: usize, t_s: f64| -> Option<&TestInterval> {
        its[g]?.intervals.iter().find(|i| {
            let m = middle(&groups[g], i);
            let half = (i.end_s - i.start_s) / 2.0;
            (m - t_s).abs() < half.max(1e-3)
        })
    };
    first
        .intervals
        .iter()
        .map(|i| {
            let t = middle(&groups[0], i);
            let latency_us = PROBES
                .iter()
                .enumerate()
                .filter_map(|(g, w)| {
                    let s = at(g, t)?.latency_us.as_ref()?;
                    Some((
                        w.name().to_string(),
                        PointLatency {
                            p50: s.p50,
                            p99: s.p99,
                            max: s.max,
                            count: s.count,
                        },
                    ))
                })
                .collect();
            SeriesPoint {
                start_s: groups[0].offset_s + i.start_s,
                end_s: groups[0].offset_s + i.end_s,
                phase: l.phase_at(t).map(|p| p.name.clone()).unwrap_or_default(),
                latency_us,
                up_bps: at(UP, t).map(|i| i.throughput_bps),
                down_bps: at(DOWN, t).map(|i| i.throughput_bps),
            }
        })
        .collect()
}

/// Several iterations' timelines as one: per point, the mean of each
/// figure over the iterations that have it.
fn mean_series(each: &[LatencyUnderLoad]) -> Vec<SeriesPoint> {
    if each.len() == 1 {
        return each[0].series.clone();
    }
    let n = each.iter().map(|l| l.series.len()).min().unwrap_or(0);
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    (0..n)
        .map(|k| {
            let pts: Vec<&SeriesPoint> = each.iter().map(|l| &l.series[k]).collect();
            let mut latency_us = std::collections::BTreeMap::new();
            for w in PROBES {
                let ps: Vec<&PointLatency> = pts
                    .iter()
                    .filter_map(|p| p.latency_us.get(w.name()))
                    .collect();
                if ps.is_empty() {
                    continue;
                }
                let m = |f: fn(&PointLatency) -> f64| {
                    ps.iter().map(|p| f(p)).sum::<f64>() / ps.len() as f64
                };
                latency_us.insert(
                    w.name().to_string(),
                    PointLatency {
                        p50: m(|p| p.p50),
                        p99: m(|p| p.p99),
                        max: m(|p| p.max),
                        count: ps.iter().map(|p| p.count).sum(),
                    },
                );
            }
            SeriesPoint {
                start_s: pts[0].start_s,
                end_s: pts[0].end_s,
                phase: pts[0].phase.clone(),
                latency_us,
                up_bps: mean(pts.iter().filter_map(|p| p.up_bps).collect()),
                down_bps: mean(pts.iter().filter_map(|p| p.down_bps).collect()),
            }
        })
        .collect()
}

/// The phases of `spec` (an rrul's), for those who draw them.
pub fn phases(spec: &TestSpec) -> Vec<Phase> {
    RrulSpec::of(spec)
        .map(|r| r.phases(spec.warmup_s, spec.duration_s))
        .unwrap_or_default()
}

pub struct Rrul;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("rrul");

impl Kind for Rrul {
    fn workload(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "flent's Realtime Response Under Load: two latency probes (rr and udp-rr, open loop at a modest rate) alone, then beside N TCP streams each way, on one timeline"
    }
    fn facts(&self) -> super::kind::KindFacts {
        super::kind::KindFacts {
            section: super::kind::Section::Own(SECTION),
            derived_flows: true,
            default_exchange: Some(crate::model::options::UDP_RR),
            default_outstanding: Some(params::PROBE_OUTSTANDING),
            default_warmup_s: Some(1.0),
            ..super::kind::KindFacts::GROUPS
        }
    }
    fn rules(&self, spec: &TestSpec) -> Result<(), Invalid> {
        RrulSpec::of(spec)?.validate(spec.warmup_s, spec.interval_s)
    }
    fn describe(&self, spec: &TestSpec) -> String {
        let r = RrulSpec::of(spec).unwrap_or_default();
        format!(
            "rrul: {} TCP stream{} each way beside two probes (rr and udp-rr {}/{} B at {}/s each, open loop): {} s idle, {} s ramp, {} s loaded",
            r.streams,
            if r.streams == 1 { "" } else { "s" },
            spec.request,
            spec.response,
            r.probe_rate,
            r.idle_s,
            spec.warmup_s,
            spec.duration_s
        )
    }
    fn describes_all(&self) -> bool {
        // It says its phases; its groups' flows are below it.
        true
    }
    fn lead_s(&self, spec: &TestSpec) -> f64 {
        // The idle phase and the streams' ramp come before its window.
        RrulSpec::of(spec).map_or(0.0, |r| r.idle_s + spec.warmup_s)
    }
    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        metrics::METRICS
    }
    fn charts(&self, points: &[PointView]) -> Vec<crate::model::chart::Chart> {
        charts::charts(points)
    }
    /// What the load added at each point, and what the queue discipline
    /// did to it.
    fn key_points(&self, points: &[PointView]) -> Vec<KeyPoint> {
        let mut k = keypoints::latency_under_load(points);
        k.extend(keypoints::queue_discipline(points));
        k
    }
    /// Its timeline (with the intervals) and its probes idle and loaded.
    fn text(&self, own: &crate::model::own::Own, intervals: bool) -> Option<String> {
        let l = LatencyUnderLoad::of(own)?;
        let mut o = String::new();
        if intervals {
            text::table(&mut o, &l);
        }
        text::lines(&mut o, &l);
        Some(o)
    }
    fn sentence(&self, r: &TestResult) -> Option<String> {
        // Its figures are the probes' wait, not the timeline's average
        // throughput: "probe p99 21.23 ms idle, 978.85 ms loaded; up
        // 18.15 Mbit/s, down 18.13 Mbit/s".
        use crate::units::{fmt_bps, fmt_us};
        let l = LatencyUnderLoad::of(&r.summary.own)?;
        let us = |v: Option<f64>| v.map_or("-".to_string(), fmt_us);
        Some(format!(
            "probe p99 {} idle, {} loaded; up {}, down {}",
            us(l.idle_p99_us),
            us(l.loaded_p99_us),
            fmt_bps(l.up_bps),
            fmt_bps(l.down_bps)
        ))
    }
    fn rate_column(&self, _spec: &TestSpec) -> RateColumn {
        RateColumn::Transactions
    }
    fn one_row(&self) -> bool {
        true
    }
    fn searches(&self) -> bool {
        false
    }
    fn composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for Rrul {
    fn takes_groups(&self) -> bool {
        false
    }
    fn groups(
        &self,
        opts: &TestOptions,
        local: bool,
        _build: &mut dyn FnMut(TestOptions) -> Result<TestSpec, String>,
    ) -> Result<Vec<Group>, GroupError> {
        groups(opts, local)
    }
    fn spec(
        &self,
        opts: &TestOptions,
        local: bool,
        _groups: &[Group],
    ) -> Result<TestSpec, GroupError> {
        Ok(spec_of(opts, local)?)
    }
    fn finish(
        &self,
        spec: &TestSpec,
        groups: &[Group],
        mixed: Mixed,
    ) -> Result<TestResult, GroupError> {
        finish(spec, groups, mixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(text: &str) -> TestOptions {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct A {
            #[command(flatten)]
            o: TestOptions,
        }
        let mut words = vec!["rrul"];
        words.extend(text.split_whitespace());
        A::try_parse_from(words).unwrap().o
    }

    #[test]
    fn probes_span_the_timeline_and_streams_start_after_idle() {
        let g = groups(&opts("--idle 2 -d 5 --streams 3"), true).unwrap();
        let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["rr", "udp-rr", "up", "down"]);
        // 2 s idle + 1 s ramp + 5 s loaded.
        for p in &g[..2] {
            assert_eq!(
                (p.spec.duration_s, p.spec.warmup_s, p.offset_s),
                (8.0, 0.0, 0.0)
            );
            assert_eq!(p.spec.rate, Some(20.0));
            assert_eq!((p.spec.request, p.spec.response), (64, 64));
            assert_eq!(p.spec.outstanding, 32);
            assert_eq!(
                p.phases
                    .iter()
                    .map(|f| p.index_at(f.start_s)..p.index_at(f.end_s))
                    .collect::<Vec<_>>(),
                vec![0..2, 2..3, 3..8]
            );
        }
        assert_eq!(
            g[0].spec.workload,
            crate::model::spec::Workload::named("rr")
        );
        assert_eq!(
            g[1].spec.workload,
            crate::model::spec::Workload::named("udp-rr")
        );
        for (s, d) in [(&g[2], Direction::Tx), (&g[3], Direction::Rx)] {
            assert_eq!((s.spec.duration_s, s.offset_s, s.spec.flows), (6.0, 2.0, 3));
            assert_eq!(s.spec.direction, d);
            assert!(s.phases.is_empty());
        }
        let spec = spec_of(&opts("--idle 2 -d 5 --streams 3"), true).unwrap();
        assert_eq!(spec.flows, 8);
        assert_eq!(
            crate::model::options::to_command_line(&spec, &super::super::facts(spec.workload)),
            "linerate run rrul --idle 2 --streams 3 --duration 5"
        );
    }

    #[test]
    fn options_rrul_sets_itself_are_refused_with_what_to_write() {
        let e = groups(&opts("--flows 8"), true).unwrap_err().to_string();
        assert!(e.contains("--streams"), "{e}");
        let e = groups(&opts("--rate 100"), true).unwrap_err().to_string();
        assert!(e.contains("--probe-rate"), "{e}");
        let e = groups(&opts("--idle 1.5"), true).unwrap_err().to_string();
        assert!(e.contains("whole intervals"), "{e}");
        let e = groups(&opts("--idle 31"), true).unwrap_err().to_string();
        assert!(e.contains("30"), "{e}");
        let e = groups(&opts("--tls"), true).unwrap_err().to_string();
        assert!(e.contains("TLS"), "{e}");
        // The streams' options reach the streams only.
        let g = groups(&opts("--message 64K --cc reno"), true).unwrap();
        assert_eq!(g[2].spec.message, 65536);
        assert_eq!(g[1].spec.cc.as_deref(), Some("reno"));
        let mut o = opts("--streams 2");
        o.run.workload = Some(crate::model::spec::Workload::named("stream"));
        assert!(super::super::build(&o, false)
            .unwrap_err()
            .to_string()
            .contains("apply to rrul"));
    }

    fn interval(k: usize, bytes: u64, p50: f64) -> TestInterval {
        TestInterval {
            index: k,
            start_s: k as f64,
            end_s: k as f64 + 1.0,
            bytes,
            throughput_bps: bytes as f64 * 8.0,
            latency_us: (p50 > 0.0).then(|| LatencySummary {
                count: 20,
                p50,
                p99: p50 * 2.0,
                max: p50 * 3.0,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn phases_split_the_timeline_and_the_streams_count_when_loaded() {
        let o = opts("--idle 2 -d 3");
        let spec = spec_of(&o, true).unwrap();
        let g = groups(&o, true).unwrap();
        // Probes over 6 intervals (2 idle, 1 ramp, 3 loaded), streams over 4.
        let probe = |p50: [f64; 6]| Iteration {
            intervals: (0..6).map(|k| interval(k, 128, p50[k])).collect(),
            ..Default::default()
        };
        let rr = probe([40.0, 42.0, 900.0, 5000.0, 6000.0, 7000.0]);
        let udp = probe([20.0, 21.0, 800.0, 4000.0, 4000.0, 4000.0]);
        let up = Iteration {
            intervals: (0..4)
                .map(|k| interval(k, 1_000_000 + k as u64, 0.0))
                .collect(),
            ..Default::default()
        };
        let down = Iteration {
            intervals: (0..4).map(|k| interval(k, 2_000_000, 0.0)).collect(),
            ..Default::default()
        };
        let its = [Some(&rr), Some(&udp), Some(&up), Some(&down)];
        let mut idle = new_hist();
        histogram::record_ns(&mut idle, 40_000);
        let mut loaded = new_hist();
        histogram::record_ns(&mut loaded, 6_000_000);
        let hs = vec![idle.clone(), new_hist(), loaded.clone()];
        let hists: Vec<&[Hist]> = vec![&hs, &hs, &[], &[]];
        let l = under_load(&spec, &g, &its, &hists);
        assert_eq!(l.phases.len(), 3);
        assert!((l.idle_p50_us.unwrap() - 40.0).abs() < 0.1);
        assert!((l.loaded_p50_us.unwrap() - 6000.0).abs() < 10.0);
        assert!(l.added_p50_us.unwrap() > 5000.0);
        // The loaded phase is the streams' intervals 1..4 (after the ramp).
        let want = (1_000_001 + 1_000_002 + 1_000_003) as f64 * 8.0 / 3.0;
        assert!((l.up_bps - want).abs() < 1e-6, "{} vs {want}", l.up_bps);
        assert!((l.down_bps - 16e6).abs() < 1e-6);
        assert_eq!(l.series.len(), 6);
        let phases: Vec<&str> = l.series.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(
            phases,
            ["idle", "idle", "ramp", "loaded", "loaded", "loaded"]
        );
        assert!(l.series[1].up_bps.is_none(), "no streams while idle");
        assert_eq!(l.series[2].up_bps, Some(8e6));
        assert_eq!(l.series[5].latency_us["udp-rr"].p50, 4000.0);
        assert_eq!(l.series[0].latency_us["rr"].p99, 80.0);
        assert_eq!((l.series[3].start_s, l.series[3].end_s), (3.0, 4.0));
    }
}
