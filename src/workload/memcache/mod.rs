//! `memcache`: a get/set mix against a real memcached (memtier_benchmark,
//! memaslap), written and parsed by linerate inside the epoll engine.
//!
//! Each flow is one connection to memcached keeping `outstanding` requests
//! in flight (memcached answers a connection's requests in order, so the
//! oldest request in flight owns the next reply). A get asks for
//! `multiget` keys; a set writes a value whose length and content follow
//! from its key and a version carried in memcached's client flags, so every
//! get verifies what it got: a wrong length or byte is a bad value,
//! counted, never silently accepted. Open loop (`--rate`) takes latency
//! from the intended send time too, as rr does.
//!
//! Before the window, `prefill` sets every key once (so a get's hit means
//! something); the test's result says how long that took.

use mio::{Registry, Token};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use super::{Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, FlowBase, Io, Status, BUDGET};
use crate::engine::pace::{self, Next, Schedule};
use crate::engine::side::ServiceProbe;
use crate::kv::keyspace::{self, KeySpace, ValueSizes};
use crate::kv::protocol::{self, Dialect, ErrorKind, Reply};
use crate::kv::service::Service;
use crate::measure::histogram::{self, new_hist, record_ns, Hist};
use crate::model::flow::FlowReport;
use crate::model::result::{Iteration, Summary};
use crate::model::spec::{self, MainMetric, TestSpec};
use params::{KvDialect, KvFigures, KvFlowStats, KvSpec, SECTION};

mod fold;
pub mod keypoints;
mod service;

use service::{memcached_threads, watch};
pub use service::{open, serve, target, watch_target};
pub mod metrics;
pub mod options;
pub mod params;
use crate::units::{fmt_bytes, fmt_rate, fmt_us};
use std::fmt::Write as _;

pub struct Memcache;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("memcache");

impl Plugin for Memcache {
    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "A get/set mix against a real memcached the agent starts (`--service`) or one that runs already (`--target`): operations/s, hit ratio, latency per operation type (memtier_benchmark, memaslap)"
    }

    fn facts(&self) -> super::kind::KindFacts {
        super::kind::KindFacts {
            section: super::kind::Section::Own(SECTION),
            search_latency: true,
            paced: true,
            rate: true,
            ..super::kind::KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        KvSpec::of(spec)?.validate()?;
        if spec.tls.is_some() {
            return Err(
                "--tls: memcached's TLS is not supported by linerate's memcache load".into(),
            );
        }
        Ok(())
    }

    fn pattern(&self) -> Pattern {
        Pattern::Service
    }

    fn watch_service(&self, service: &Service) -> Option<ServiceProbe> {
        Some(watch(service))
    }

    fn server_cpu(&self, service_started: bool) -> bool {
        service_started
    }

    fn own_fold(&self, _spec: &TestSpec) -> Option<Box<dyn super::OwnFold>> {
        Some(Box::<fold::KvFold>::default())
    }

    /// memcached, with the threads of its command (`-t N`, default 4) and
    /// the cores it kept busy (its CPU per operation times operations).
    fn served(&self, spec: &TestSpec, summary: Option<&Summary>) -> Option<super::Served> {
        let kv = KvSpec::of(spec).ok()?;
        let busy_cores = summary
            .and_then(|s| KvFigures::of(&s.own))
            .and_then(|k| Some(k.server_us_per_op? * k.ops_per_s / 1e6));
        Some(super::Served {
            name: "memcached",
            threads: kv.service.as_deref().map_or(4, memcached_threads),
            command: kv.service,
            busy_cores,
        })
    }

    fn metrics(&self) -> &'static [crate::model::metric::Metric] {
        metrics::METRICS
    }

    /// Where more connections stop buying operations, memcached's CPU
    /// per operation and the hit ratio.
    fn key_points(
        &self,
        points: &[crate::model::points::PointView],
    ) -> Vec<crate::model::points::KeyPoint> {
        let mut k = keypoints::kv_saturation(points);
        k.extend(keypoints::kv_cost(points));
        k
    }

    fn words(&self, s: &Summary) -> Option<String> {
        let k = KvFigures::of(&s.own)?;
        Some(format!(
            "{} ops, hit ratio {}",
            fmt_rate(k.ops_per_s),
            k.hit_ratio
                .map_or("-".into(), |h| format!("{:.1}%", h * 100.0))
        ))
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let kv = KvSpec::of(spec).unwrap_or_default();
        let server = match (&kv.service, &kv.target) {
            (_, Some(t)) => format!("memcached at {t}"),
            (Some(s), None) => format!("`{s}` on the agent"),
            (None, None) => "memcached".into(),
        };
        let mut s =
            format!(
            "memcache {}:{} get:set, {} keys of {} B ({}), values {}, {} commands against {server}",
            kv.gets,
            kv.sets,
            kv.keys,
            kv.key_size,
            kv.zipf.map(|z| format!("zipf {z}")).unwrap_or_else(|| "uniform".into()),
            kv.values,
            match kv.dialect {
                KvDialect::Text => "get/set",
                KvDialect::Meta => "mg/ms",
            },
        );
        if kv.multiget > 1 {
            let _ = write!(s, ", {} keys per get", kv.multiget);
        }
        if spec.outstanding > 1 {
            let _ = write!(s, ", {} outstanding", spec.outstanding);
        }
        s += &super::open_loop_text(spec);
        s
    }

    fn report_lines(&self, _spec: &TestSpec, it: &Iteration) -> Vec<(&'static str, String)> {
        KvFigures::of(&it.own)
            .as_ref()
            .map(kv_lines)
            .unwrap_or_default()
    }

    fn main_metric(&self, _spec: &TestSpec) -> MainMetric {
        MainMetric::TransactionRate
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), WorkloadError> {
        let kv = &mix_of(spec)?;
        ValueSizes::parse(&kv.values).map_err(|e| WorkloadError::Values(e.to_string()))?;
        KeySpace::new(kv.keys, kv.key_size, kv.zipf)
            .map_err(|e| WorkloadError::KeySpace(e.to_string()))?;
        if let Some(s) = &kv.service {
            crate::kv::service::check_command(s)
                .map_err(|e| WorkloadError::KvInput(e.to_string()))?;
        }
        Ok(())
    }

    /// Connections that failed mid-test are the server's failure (a flow
    /// never fails on its own): the result is partial, with the cause.
    fn mid_test_failure(&self, spec: &TestSpec, errors: &[String]) -> Option<String> {
        Some(format!(
            "{} of {} connections to memcached failed mid-test: {}",
            errors.len(),
            spec.flows,
            errors.first()?
        ))
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        let mix = Arc::new(Mix::new(spec)?);
        Ok(conns
            .established
            .into_iter()
            .map(|(id, stream, _)| {
                Box::new(KvFlow::new(
                    // An open loop's responses carry their arrival stamp.
                    FlowBase::new(id, stream).with_stamps(spec.rate.is_some()),
                    mix.clone(),
                    spec.outstanding as usize,
                    pace::for_flow(spec, spec.flows as usize, id),
                )) as Box<dyn Flow>
            })
            .collect())
    }

    fn agent_flows(
        &self,
        _spec: &TestSpec,
        _conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        // memcached is the server: the agent runs no flows of its own.
        Ok(Vec::new())
    }
}

/// A memcache result's own lines: operations and hit ratio, latency per
/// operation type, what was checked, CPU per operation, the prefill, and
/// memcached's own counts.
fn kv_lines(k: &KvFigures) -> Vec<(&'static str, String)> {
    let mut lines = vec![(
        "memcache",
        format!(
            "{} operations: gets {} (keys), sets {}; hit ratio {}",
            fmt_rate(k.ops_per_s),
            fmt_rate(k.gets_per_s),
            fmt_rate(k.sets_per_s),
            k.hit_ratio
                .map(|h| format!("{:.4} ({} hits, {} misses)", h, k.hits, k.misses))
                .unwrap_or_else(|| "- (no gets)".into())
        ),
    )];
    for (name, l) in [
        ("get latency", &k.get_latency_us),
        ("set latency", &k.set_latency_us),
        ("get (CO)", &k.get_corrected_us),
        ("set (CO)", &k.set_corrected_us),
    ] {
        if let Some(l) = l {
            lines.push((
                name,
                format!(
                    "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} requests)",
                    fmt_us(l.p50),
                    fmt_us(l.p90),
                    fmt_us(l.p99),
                    fmt_us(l.p999),
                    fmt_us(l.max),
                    l.count
                ),
            ));
        }
    }
    lines.push((
        "checked",
        format!(
            "{} bad values, {} error replies{}",
            k.bad_values,
            k.errors,
            k.first_problem
                .as_ref()
                .map(|p| format!(" (first: {p})"))
                .unwrap_or_default()
        ),
    ));
    let per = |v: Option<f64>| {
        v.map(|v| format!("{v:.2} µs"))
            .unwrap_or_else(|| "-".into())
    };
    lines.push((
        "cpu/op",
        format!(
            "client {}, memcached {} (process CPU per operation)",
            per(k.client_us_per_op),
            per(k.server_us_per_op)
        ),
    ));
    if let Some(p) = &k.prefill {
        lines.push((
            "prefill",
            format!(
                "{} keys ({}) set in {:.2} s over {} connections{}",
                p.keys,
                fmt_bytes(p.bytes),
                p.seconds,
                p.connections,
                if p.errors > 0 {
                    format!(", {} sets refused", p.errors)
                } else {
                    String::new()
                }
            ),
        ));
    }
    if let Some(s) = &k.server {
        let d = |n: &str| s.delta.get(n).copied().unwrap_or(0);
        lines.push((
            "server",
            format!(
                "{}: cmd_get +{}, cmd_set +{}, get_hits +{}, get_misses +{}, evictions +{}; {} items, {} in use of {}",
                s.name,
                d("cmd_get"),
                d("cmd_set"),
                d("get_hits"),
                d("get_misses"),
                d("evictions"),
                s.end.get("curr_items").copied().unwrap_or(0),
                fmt_bytes(s.end.get("bytes").copied().unwrap_or(0).max(0) as u64),
                fmt_bytes(s.end.get("limit_maxbytes").copied().unwrap_or(0).max(0) as u64),
            ),
        ));
    }
    lines
}

fn dialect(d: KvDialect) -> Dialect {
    match d {
        KvDialect::Text => Dialect::Text,
        KvDialect::Meta => Dialect::Meta,
    }
}

/// What every flow of a test shares: the key space, the value sizes and
/// the operation mix.
pub struct Mix {
    keys: KeySpace,
    sizes: ValueSizes,
    dialect: Dialect,
    /// A request is a get with probability gets / (gets + sets).
    get_share: f64,
    multiget: usize,
}

impl Mix {
    pub fn new(spec: &TestSpec) -> Result<Mix, WorkloadError> {
        let kv = &mix_of(spec)?;
        Mix::of(kv)
    }

    pub fn of(kv: &KvSpec) -> Result<Mix, WorkloadError> {
        Ok(Mix {
            keys: KeySpace::new(kv.keys, kv.key_size, kv.zipf)
                .map_err(|e| WorkloadError::KvInput(e.to_string()))?,
            sizes: ValueSizes::parse(&kv.values)
                .map_err(|e| WorkloadError::KvInput(e.to_string()))?,
            dialect: dialect(kv.dialect),
            get_share: kv.gets as f64 / (kv.gets + kv.sets) as f64,
            multiget: kv.multiget.max(1) as usize,
        })
    }
}

/// A request in flight: what it asked, when it was sent and when it was due.
struct Pending {
    /// Gets: how many keys it asked for (their indices are the next ones
    /// in the flow's `asked`; text: until END, meta: one); None: a set.
    get: Option<usize>,
    /// Values this get received so far.
    hits: usize,
    sent: Instant,
    intended: Instant,
    /// When it could go: due, and a slot free.
    could: Instant,
}

pub struct KvFlow {
    base: FlowBase,
    mix: Arc<Mix>,
    outstanding: usize,
    rng: SmallRng,
    /// This flow's next set version (its id in the top bits: versions of
    /// different flows never collide, so a value always names its writer).
    version: u32,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    in_flight: VecDeque<Pending>,
    /// When the last response arrived (see `rr::Requester::freed_at`).
    freed_at: Option<Instant>,
    /// The key indices of the gets in flight, in order (no allocation per
    /// request: Pending counts its share).
    asked: VecDeque<u64>,
    key: Vec<u8>,
    /// Open loop: when requests are due; start and requests started.
    schedule: Option<Schedule>,
    start: Option<Instant>,
    started: u64,
    timer_armed: bool,
    stats: KvFlowStats,
    get_hist: Hist,
    set_hist: Hist,
    get_corr: Hist,
    set_corr: Hist,
}

impl KvFlow {
    /// `schedule`: this flow's open loop (None: closed loop).
    pub fn new(
        base: FlowBase,
        mix: Arc<Mix>,
        outstanding: usize,
        schedule: Option<Schedule>,
    ) -> Self {
        let seed =
            (base.id as u64) << 32 ^ std::process::id() as u64 ^ crate::engine::udp::mono_ns();
        KvFlow {
            version: (base.id & 0xfff) << 20,
            base,
            mix,
            outstanding: outstanding.max(1),
            rng: SmallRng::seed_from_u64(seed),
            out: Vec::with_capacity(64 << 10),
            out_pos: 0,
            inbuf: Vec::with_capacity(64 << 10),
            in_flight: VecDeque::new(),
            freed_at: None,
            asked: VecDeque::new(),
            key: Vec::with_capacity(256),
            schedule,
            start: None,
            started: 0,
            timer_armed: false,
            stats: KvFlowStats::default(),
            get_hist: new_hist(),
            set_hist: new_hist(),
            get_corr: new_hist(),
            set_corr: new_hist(),
        }
    }

    /// Queues one request (get or set by the mix), due at `intended`.
    fn queue(&mut self, now: Instant, intended: Instant, could: Instant) {
        let mix = &*self.mix;
        let d = mix.dialect;
        if self.rng.random::<f64>() < mix.get_share {
            let first = self.asked.len();
            for _ in 0..mix.multiget {
                self.asked.push_back(mix.keys.pick(&mut self.rng));
            }
            let asked = &self.asked;
            protocol::encode_get_with(
                d,
                mix.multiget,
                |i, o| mix.keys.append_key(asked[first + i], o),
                &mut self.out,
            );
            let pending = |n| Pending {
                get: Some(n),
                hits: 0,
                sent: now,
                intended,
                could,
            };
            match d {
                // One command, one END for all the keys.
                Dialect::Text => self.in_flight.push_back(pending(mix.multiget)),
                // One mg per key, each answered on its own.
                Dialect::Meta => {
                    for _ in 0..mix.multiget {
                        self.in_flight.push_back(pending(1));
                    }
                }
            }
        } else {
            let i = mix.keys.pick(&mut self.rng);
            self.version = (self.version & 0xfff0_0000) | ((self.version + 1) & 0x000f_ffff);
            let v = self.version;
            let len = mix.sizes.size_for(i, v);
            let w = keyspace::word(i, v);
            mix.keys.key(i, &mut self.key);
            protocol::encode_set(
                d,
                &self.key,
                v,
                len,
                |b| keyspace::fill(b, w),
                &mut self.out,
            );
            self.in_flight.push_back(Pending {
                get: None,
                hits: 0,
                sent: now,
                intended,
                could,
            });
        }
        self.started += 1;
    }

    /// Requests (closed loop) up to `outstanding`, or (open loop) those
    /// due by now; then writes what is queued. Busy if the budget ran out.
    fn pump(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let now = cx.now;
        match self.schedule.as_mut() {
            None => {
                while self.requests_in_flight() < self.outstanding {
                    self.queue(now, now, now);
                }
            }
            Some(schedule) => {
                schedule.begin(*self.start.get_or_insert(now));
                while self.requests_in_flight() < self.outstanding {
                    match self.schedule.as_mut().and_then(|s| s.next_by(now)) {
                        Some(Next::Due(due)) => {
                            // The sender's own lateness: from when it could
                            // have sent (due, and a slot free).
                            let could = self.freed_at.map_or(due, |f| f.max(due));
                            record_ns(
                                &mut cx.waits.held,
                                could.saturating_duration_since(due).as_nanos() as u64,
                            );
                            record_ns(
                                &mut cx.waits.send_late,
                                now.saturating_duration_since(could).as_nanos() as u64,
                            );
                            self.queue(now, due, could)
                        }
                        Some(Next::At(at)) => {
                            if !self.timer_armed {
                                cx.schedule(at);
                                self.timer_armed = true;
                            }
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        self.flush(cx)
    }

    /// Requests, not mg commands: a meta multi-get counts once.
    fn requests_in_flight(&self) -> usize {
        match self.mix.dialect {
            Dialect::Meta if self.mix.multiget > 1 => {
                self.in_flight.len().div_ceil(self.mix.multiget)
            }
            _ => self.in_flight.len(),
        }
    }

    fn flush(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let mut moved = 0;
        while self.out_pos < self.out.len() {
            if moved >= BUDGET {
                return Ok(Status::Busy);
            }
            match self.base.send(&self.out[self.out_pos..])? {
                Io::Moved(n) => {
                    self.out_pos += n;
                    moved += n;
                    self.base.bytes_tx += n as u64;
                    cx.counters.bytes_tx += n as u64;
                }
                Io::Blocked => return Ok(Status::Open),
                Io::Eof => return Err(closed()),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Ok(Status::Open)
    }

    /// Reads what arrived and settles the replies it completes.
    fn receive(&mut self, cx: &mut Ctx<'_>) -> io::Result<Status> {
        let mut moved = 0;
        loop {
            if moved >= BUDGET {
                return Ok(Status::Busy);
            }
            match self.base.recv(cx.buf)? {
                Io::Moved(n) => {
                    moved += n;
                    self.base.bytes_rx += n as u64;
                    cx.counters.bytes_rx += n as u64;
                    self.inbuf.extend_from_slice(&cx.buf[..n]);
                    cx.now = Instant::now();
                    self.settle(cx)?;
                }
                Io::Blocked => return Ok(Status::Open),
                Io::Eof => return Err(closed()),
            }
        }
    }

    fn settle(&mut self, cx: &mut Ctx<'_>) -> io::Result<()> {
        let mut at = 0;
        let d = self.mix.dialect;
        loop {
            let buf = std::mem::take(&mut self.inbuf);
            let parsed = protocol::parse(d, &buf[at..]);
            let step = match parsed {
                Ok(Some((reply, used))) => {
                    let r = self.on_reply(cx, reply);
                    at += used;
                    Some(r)
                }
                Ok(None) => None,
                Err(e) => {
                    self.inbuf = buf;
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("memcached: {e}"),
                    ));
                }
            };
            self.inbuf = buf;
            match step {
                Some(r) => r?,
                None => break,
            }
        }
        self.inbuf.drain(..at);
        Ok(())
    }

    fn on_reply(&mut self, cx: &mut Ctx<'_>, reply: Reply<'_>) -> io::Result<()> {
        let Some(head) = self.in_flight.front_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "memcached answered a request that was not asked",
            ));
        };
        let counting = cx.counting;
        match reply {
            Reply::Value { key, flags, data } => {
                let Some(n) = head.get else {
                    return Err(unexpected("a value", "a set"));
                };
                let expect = self.asked.iter().take(n);
                let idx = self.mix.keys.index_of(key);
                let ok = idx.is_some_and(|i| {
                    expect.clone().any(|&k| k == i)
                        && keyspace::verify(&self.mix.sizes, data, i, flags)
                });
                head.hits += 1;
                if counting {
                    cx.counters.kv_hits += 1;
                    self.stats.hits += 1;
                    if !ok {
                        cx.counters.kv_bad_values += 1;
                        self.stats.bad_values += 1;
                        if self.stats.first_problem.is_none() {
                            self.stats.first_problem = Some(format!(
                                "key {} came back with {} bytes under version {flags}, not what was set",
                                String::from_utf8_lossy(key),
                                data.len()
                            ));
                        }
                    }
                }
                // Meta: one mg, one reply: the request is done.
                if self.mix.dialect == Dialect::Meta {
                    self.complete(cx);
                }
            }
            Reply::End | Reply::Miss => {
                if head.get.is_none() {
                    return Err(unexpected("END", "a set"));
                }
                self.complete(cx);
            }
            Reply::Stored | Reply::NotStored | Reply::Exists | Reply::NotFound => {
                if head.get.is_some() {
                    return Err(unexpected("a store reply", "a get"));
                }
                self.complete(cx);
            }
            Reply::Error { kind, message } => {
                if counting {
                    cx.counters.kv_errors += 1;
                    self.stats.errors += 1;
                    if self.stats.first_problem.is_none() {
                        let word = match kind {
                            ErrorKind::Error => "ERROR",
                            ErrorKind::Client => "CLIENT_ERROR",
                            ErrorKind::Server => "SERVER_ERROR",
                        };
                        self.stats.first_problem = Some(format!(
                            "{word} {}",
                            String::from_utf8_lossy(message).trim()
                        ));
                    }
                }
                // An error ends the request it answers (a text multi-get
                // sends no END after it).
                self.complete(cx);
            }
        }
        Ok(())
    }

    /// The oldest request is answered: count it, record its latency.
    fn complete(&mut self, cx: &mut Ctx<'_>) {
        let Some(p) = self.in_flight.pop_front() else {
            return;
        };
        // An open loop's latency ends when the response reached this host
        // (its kernel stamp); the wait for this end to read it is apart.
        let delay = self.base.read_delay();
        if let (Some(d), true) = (delay, cx.counting) {
            record_ns(&mut cx.waits.read_delay, d.as_nanos() as u64);
        }
        let now = match (self.schedule.is_some(), delay) {
            (true, Some(d)) => cx.now.checked_sub(d).unwrap_or(cx.now).max(p.sent),
            _ => cx.now,
        };
        self.freed_at = Some(now);
        let lat = now.saturating_duration_since(p.sent).as_nanos() as u64;
        let corr = now.saturating_duration_since(p.intended).as_nanos() as u64;
        if let Some(n) = p.get {
            self.asked.drain(..n.min(self.asked.len()));
        }
        self.base.transactions += 1;
        if !cx.counting {
            return;
        }
        record_ns(cx.hist, lat);
        if self.schedule.is_some() {
            record_ns(cx.hist_corrected, corr);
            // Less the sender's own lateness: held + from the send.
            let held = p.could.saturating_duration_since(p.intended).as_nanos() as u64;
            record_ns(&mut cx.waits.net, lat + held);
        }
        match p.get {
            Some(n) => {
                let n = n as u64;
                let misses = n.saturating_sub(p.hits as u64);
                cx.counters.kv_gets += n;
                cx.counters.kv_misses += misses;
                cx.counters.transactions += n;
                self.stats.gets += n;
                self.stats.misses += misses;
                record_ns(&mut self.get_hist, lat);
                if self.schedule.is_some() {
                    record_ns(&mut self.get_corr, corr);
                }
            }
            None => {
                cx.counters.kv_sets += 1;
                cx.counters.transactions += 1;
                self.stats.sets += 1;
                record_ns(&mut self.set_hist, lat);
                if self.schedule.is_some() {
                    record_ns(&mut self.set_corr, corr);
                }
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "memcached closed the connection",
    )
}

fn unexpected(got: &str, want: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("memcached sent {got} where the reply to {want} was due"),
    )
}

impl Flow for KvFlow {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.base.register(registry, token)
    }

    fn scheduled(&self) -> bool {
        self.schedule.is_some()
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, writable: bool) -> Status {
        let r = (|| {
            let _ = writable;
            let mut busy = false;
            if readable {
                if let Status::Busy = self.receive(cx)? {
                    busy = true;
                }
            }
            // Replies free room for requests; a writable socket takes the
            // rest of what is queued.
            if let Status::Busy = self.pump(cx)? {
                busy = true;
            }
            Ok(if busy { Status::Busy } else { Status::Open })
        })();
        r.unwrap_or_else(Status::Failed)
    }

    fn timer(&mut self, cx: &mut Ctx<'_>) -> Status {
        self.timer_armed = false;
        self.pump(cx).unwrap_or_else(Status::Failed)
    }

    fn report(&self) -> Option<FlowReport> {
        let enc = |h: &Hist| (!h.is_empty()).then(|| histogram::encode(h));
        let mut r = self.base.report();
        r.own.set(
            SECTION,
            &KvFlowStats {
                get_latency: enc(&self.get_hist),
                set_latency: enc(&self.set_hist),
                get_corrected: enc(&self.get_corr),
                set_corrected: enc(&self.set_corr),
                ..self.stats.clone()
            },
        );
        Some(r)
    }

    fn persistent(&self) -> bool {
        true
    }
}

/// A spec's key-value mix, or why it has none.
fn mix_of(spec: &TestSpec) -> Result<KvSpec, WorkloadError> {
    match spec.own.try_get(SECTION) {
        Ok(Some(kv)) => Ok(kv),
        Ok(None) => Err(WorkloadError::NoKvMix),
        Err(e) => Err(WorkloadError::KvInput(e)),
    }
}
