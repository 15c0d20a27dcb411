//! One host's half of a test: its workers on a common timeline, the CPU
//! snapshots at the window's edges, and the merge of per-worker intervals
//! into one sample per interval. The controller runs a client side, the
//! agent a server side; both use this code.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::flow::Flow;
use super::worker::{self, WorkerMsg, WorkerSetup};
use super::EngineError;
use crate::measure::cpu::{self, CpuSnapshot};
use crate::measure::histogram::{self, new_hist, Hist, WaitHists};
use crate::measure::interval::Timeline;
use crate::measure::placement::cpu_for_worker;
use crate::model::flow::FlowReport;
use crate::model::sample::{
    Counters, CpuWindow, IntervalSample, KernelUdp, ServiceWindow, WorkerPlacement,
};
use crate::model::spec::TestSpec;

/// What a side starts with: its flows, built by the caller's workload from
/// the connections made for it (the engine never names a workload).
pub struct SideSetup {
    pub agent: bool,
    pub spec: TestSpec,
    /// Spread over the workers round robin, in this order.
    pub flows: Vec<Box<dyn Flow>>,
    /// When the timeline begins (None: now). A many-host test gives every
    /// host the same scheduled instant, so that interval edges line up even
    /// when a host's thread woke a little late (warm-up absorbs it).
    pub t0: Option<Instant>,
    /// A server process this side watches (memcached).
    pub service: Option<ServiceProbe>,
    /// Read the kernel's UDP counters at the window's edges (the caller's
    /// workload moves datagrams).
    pub kernel_udp: bool,
    /// Keep every interval in `SideReport::samples` (the controller, whose
    /// result holds them); an agent streams each one to its controller and
    /// keeps none, so a day-long test does not grow it.
    pub keep_samples: bool,
}

/// A server process a side watches over its window: its CPU becomes the
/// side's process CPU (the agent's own threads are idle), and its `stats`
/// are read at the window's edges.
#[derive(Default)]
pub struct ServiceProbe {
    pub pid: Option<u32>,
    /// How its own counters are read (None: only its CPU is watched).
    pub stats: Option<Box<dyn ServiceStats>>,
}

/// A service's own counters, name -> value (memcached's `stats`).
pub type Stats = BTreeMap<String, String>;

/// How a side reads a watched server's counters: given by the workload
/// that knows the server (the engine never speaks its protocol).
pub trait ServiceStats: Send {
    /// The counters now (None: no answer; the edge keeps the previous
    /// reading).
    fn read(&self) -> Option<Stats>;
    /// What the server counted between two readings.
    fn window(&self, first: &Stats, last: &Stats) -> ServiceWindow;
}

struct Pending {
    workers: usize,
    start: Instant,
    end: Instant,
    counters: Counters,
    hist: Hist,
    hist_corrected: Hist,
}

struct Finished {
    intervals: usize,
}

/// What a side tells its owner while it runs.
pub trait Observer {
    /// A merged interval of this side is ready.
    fn interval(&mut self, sample: &IntervalSample);
    /// Its latency histograms, just before `interval` (an agent running
    /// clients forwards them so that the controller merges hosts exactly).
    fn interval_hists(&mut self, _index: usize, _latency: &Hist, _corrected: &Hist) {}
    /// Polled every few milliseconds: true ends the test now (workers close
    /// their current interval as partial and stop).
    fn should_stop(&mut self) -> bool;
}

/// Everything one side measured, ready for the result.
pub struct SideReport {
    pub samples: Vec<IntervalSample>,
    pub window_cpu: Option<CpuWindow>,
    /// Latency over every interval of the window (merged).
    pub hist: Hist,
    pub hist_corrected: Hist,
    pub window_s: f64,
    pub flows: Vec<FlowReport>,
    pub placement: Vec<WorkerPlacement>,
    pub errors: Vec<String>,
    /// The window ran to its end (timed) or every flow finished (finite).
    pub complete: bool,
    /// UDP: the kernel's UDP counters over the window (this namespace).
    pub kernel_udp: Option<KernelUdp>,
    /// The watched server's own counts over the window.
    pub service: Option<ServiceWindow>,
    /// What this end's own scheduling added over the window (open loops).
    pub waits: WaitHists,
}

impl Default for SideReport {
    fn default() -> Self {
        SideReport {
            samples: Default::default(),
            window_cpu: Default::default(),
            hist: new_hist(),
            hist_corrected: new_hist(),
            window_s: Default::default(),
            flows: Default::default(),
            placement: Default::default(),
            errors: Default::default(),
            complete: Default::default(),
            kernel_udp: None,
            service: None,
            waits: WaitHists::default(),
        }
    }
}

pub struct Side {
    rx: Receiver<WorkerMsg>,
    handles: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    t0: Instant,
    timeline: Timeline,
    finite: bool,
    pending: BTreeMap<usize, Pending>,
    finished: Vec<Option<Finished>>,
    /// The flows of finished workers, closed at `finish` (see
    /// `WorkerMsg::Finished::open`).
    open: Vec<Box<dyn crate::engine::flow::Flow>>,
    /// Edge 0 at window start, edge k+1 at the end of interval k.
    cpu_edges: CpuEdges,
    /// Processes whose CPU counts as this end's (`cpu::tunnel_helpers`).
    helpers: Vec<u32>,
    /// Intervals emitted so far.
    emitted: usize,
    /// The first emitted interval's start and the latest one's end (s).
    span: Option<(f64, f64)>,
    /// See `SideSetup::keep_samples`.
    keep_samples: bool,
    report: SideReport,
    total_hist: Hist,
    total_hist_corrected: Hist,
    /// UDP: the kernel's counters at the window's first and latest edge.
    udp_edges: Option<(Option<KernelUdp>, Option<KernelUdp>)>,
    service: Option<ServiceProbe>,
    /// The service's stats at the window's first and latest edge.
    stats_edges: (Option<Stats>, Option<Stats>),
}

fn payload_len(spec: &TestSpec) -> usize {
    let biggest = [
        spec.message as u64,
        spec.request,
        spec.response,
        spec.reply,
        spec.bytes.unwrap_or(0),
    ]
    .into_iter()
    .max()
    .unwrap_or(1);
    (biggest as usize).clamp(1, 4 << 20)
}

impl Side {
    pub fn start(mut setup: SideSetup) -> Result<Side, EngineError> {
        let spec = setup.spec.clone();
        let workers = if setup.agent {
            spec.agent_workers
        } else {
            spec.workers
        } as usize;
        let cpus = if setup.agent {
            spec.agent_cpus.clone()
        } else {
            spec.cpus.clone()
        };
        let mut per_worker: Vec<Vec<Box<dyn Flow>>> = (0..workers).map(|_| Vec::new()).collect();
        for (i, f) in setup.flows.drain(..).enumerate() {
            per_worker[i % workers].push(f);
        }
        let len = payload_len(&spec);
        let payload: Arc<Vec<u8>> = Arc::new((0..len).map(|i| (i % 251) as u8).collect());
        let buf_len = spec.effective_read_size();
        let timeline = Timeline {
            warmup: Duration::from_secs_f64(if spec.is_finite() { 0.0 } else { spec.warmup_s }),
            interval: Duration::from_secs_f64(spec.interval_s),
            duration: (!spec.is_finite()).then(|| Duration::from_secs_f64(spec.duration_s)),
        };
        let finite = spec.is_finite() && !setup.agent;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let t0 = setup.t0.unwrap_or_else(Instant::now).min(Instant::now());
        let mut handles = Vec::new();
        for (i, flows) in per_worker.into_iter().enumerate() {
            // --io threads runs one flow per thread: a worker that holds
            // more (a crr server listening on several addresses, one
            // acceptor each) polls them instead.
            let blocking = spec.io == crate::model::spec::IoMode::Threads && flows.len() <= 1;
            let ws = WorkerSetup {
                index: i,
                flows,
                cpus: cpus.as_ref().map(|c| cpu_for_worker(c, i)),
                payload: payload.clone(),
                buf_len,
                t0,
                timeline,
                stop: stop.clone(),
                tx: tx.clone(),
                finite,
                spin: spec.spin,
                hybrid: spec.pacing == crate::model::spec::Pacing::Hybrid,
                blocking,
            };
            let h = std::thread::Builder::new()
                .name(format!("linerate-w{i}"))
                .spawn(move || worker::run(ws))
                .map_err(EngineError::WorkerThread)?;
            handles.push(h);
        }
        let service = setup.service.take();
        let mut cpu_edges = CpuEdges::default();
        // A userspace tunnel in this end's namespace works for this end.
        let helpers = cpu::tunnel_helpers();
        let mut first_udp = None;
        let mut first_stats = None;
        if timeline.warmup.is_zero() {
            cpu_edges.push(cpu::snapshot_with(
                service.as_ref().and_then(|s| s.pid),
                &helpers,
                None,
            ));
            first_udp = setup.kernel_udp.then(crate::engine::udp::kernel_udp);
            first_stats = read_stats(&service);
        }
        Ok(Side {
            rx,
            handles,
            stop,
            t0,
            timeline,
            finite,
            pending: BTreeMap::new(),
            finished: (0..workers).map(|_| None).collect(),
            open: Vec::new(),
            cpu_edges,
            helpers,
            emitted: 0,
            span: None,
            keep_samples: setup.keep_samples,
            report: SideReport::default(),
            total_hist: new_hist(),
            total_hist_corrected: new_hist(),
            udp_edges: setup.kernel_udp.then_some((first_udp, None)),
            service,
            stats_edges: (first_stats, None),
        })
    }

    /// A CPU snapshot at an edge (and for UDP the kernel's counters, for a
    /// watched service its stats).
    fn push_edge(&mut self) {
        let pid = self.service.as_ref().and_then(|s| s.pid);
        let edge = cpu::snapshot_with(pid, &self.helpers, self.cpu_edges.last());
        self.cpu_edges.push(edge);
        if let Some(st) = read_stats(&self.service) {
            if self.stats_edges.0.is_none() {
                self.stats_edges.0 = Some(st);
            } else {
                self.stats_edges.1 = Some(st);
            }
        }
        if let Some((first, last)) = &mut self.udp_edges {
            let k = crate::engine::udp::kernel_udp();
            if first.is_none() {
                *first = Some(k);
            } else {
                *last = Some(k);
            }
        }
    }

    /// UDP: the kernel's counters over the edges passed so far.
    pub fn window_kernel_udp(&self) -> Option<KernelUdp> {
        match self.udp_edges {
            Some((Some(a), Some(b))) => Some(b.since(&a)),
            _ => None,
        }
    }

    /// The watched service's counts over the edges passed so far.
    pub fn window_service(&self) -> Option<ServiceWindow> {
        let stats = self.service.as_ref()?.stats.as_ref()?;
        match &self.stats_edges {
            (Some(a), Some(b)) => Some(stats.window(a, b)),
            _ => None,
        }
    }

    /// When this side's timeline began (warm-up start).
    pub fn t0(&self) -> Instant {
        self.t0
    }

    /// CPU over the intervals emitted so far.
    pub fn window_cpu(&self) -> Option<CpuWindow> {
        let k = self.emitted;
        (k > 0 && self.cpu_edges.len() > k)
            .then(|| cpu::window(self.cpu_edges.get(0), self.cpu_edges.get(k)))
    }

    fn next_cpu_edge(&self) -> Option<Instant> {
        let n = self.cpu_edges.len();
        let off = if n == 0 {
            Some(self.timeline.warmup)
        } else {
            self.timeline.edge(n - 1)
        };
        off.map(|o| self.t0 + o)
    }

    fn handle(&mut self, msg: WorkerMsg) {
        match msg {
            WorkerMsg::Interval {
                index,
                start,
                end,
                counters,
                hist,
                hist_corrected,
                ..
            } => {
                match self.pending.entry(index) {
                    // The first worker's histograms become the merge target.
                    Entry::Vacant(v) => {
                        v.insert(Pending {
                            workers: 1,
                            start,
                            end,
                            counters,
                            hist: *hist,
                            hist_corrected: *hist_corrected,
                        });
                    }
                    Entry::Occupied(mut o) => {
                        let p = o.get_mut();
                        p.workers += 1;
                        p.start = p.start.min(start);
                        p.end = p.end.max(end);
                        p.counters += counters;
                        histogram::merge(&mut p.hist, &hist);
                        histogram::merge(&mut p.hist_corrected, &hist_corrected);
                    }
                }
            }
            WorkerMsg::Finished {
                worker,
                intervals,
                flows,
                placement,
                errors,
                fatal,
                open,
                waits,
            } => {
                self.open.extend(open);
                self.report.waits.merge(&waits);
                self.report.flows.extend(flows);
                self.report.placement.push(placement);
                self.report.errors.extend(errors);
                if let Some(f) = fatal {
                    self.report.errors.push(f);
                }
                self.finished[worker] = Some(Finished { intervals });
            }
        }
    }

    fn all_finished(&self) -> bool {
        self.finished.iter().all(Option::is_some)
    }

    /// Emits interval `k` once every worker reported it (or ended before it).
    fn try_emit(&mut self, obs: &mut dyn Observer) {
        loop {
            let k = self.emitted;
            let expected = self
                .finished
                .iter()
                .filter(|f| f.as_ref().is_none_or(|f| f.intervals > k))
                .count();
            let Some(p) = self.pending.get(&k) else {
                return;
            };
            if p.workers < expected {
                return;
            }
            let partial_end =
                self.all_finished() && self.timeline.edge(k).is_none_or(|e| p.end < self.t0 + e);
            if self.cpu_edges.len() < k + 2 {
                if partial_end || self.finite && self.all_finished() {
                    self.push_edge();
                } else {
                    return;
                }
            }
            let p = self.pending.remove(&k).unwrap();
            let window_start = self.t0 + self.timeline.warmup;
            let sample = IntervalSample {
                index: k,
                start_s: p
                    .start
                    .saturating_duration_since(window_start)
                    .as_secs_f64(),
                end_s: p.end.saturating_duration_since(window_start).as_secs_f64(),
                counters: p.counters,
                latency_us: histogram::summarize(&p.hist),
                latency_corrected_us: histogram::summarize(&p.hist_corrected),
                cpu: Some(cpu::window(
                    self.cpu_edges.get(k),
                    self.cpu_edges.get(k + 1),
                )),
            };
            histogram::merge(&mut self.total_hist, &p.hist);
            histogram::merge(&mut self.total_hist_corrected, &p.hist_corrected);
            obs.interval_hists(k, &p.hist, &p.hist_corrected);
            obs.interval(&sample);
            self.emitted = k + 1;
            self.cpu_edges.forget_before(k + 1);
            self.span = Some((self.span.map_or(sample.start_s, |s| s.0), sample.end_s));
            if self.keep_samples {
                self.report.samples.push(sample);
            }
        }
    }

    /// Runs until the measurement window is complete (timed tests), until
    /// every flow is done (finite tests), or until the observer says stop, in
    /// which case the workers close their current interval and end.
    /// Returns true when the window completed on its own.
    pub fn collect(&mut self, obs: &mut dyn Observer) -> bool {
        let n = self.timeline.intervals();
        let mut stop_sent = false;
        loop {
            let now = Instant::now();
            if let Some(e) = self.next_cpu_edge() {
                if now >= e && self.cpu_edges.len() <= n.unwrap_or(usize::MAX) {
                    self.push_edge();
                    continue;
                }
            }
            let wait = self
                .next_cpu_edge()
                .map(|e| e.saturating_duration_since(now))
                .unwrap_or(Duration::from_millis(20))
                .min(Duration::from_millis(20));
            match self.rx.recv_timeout(wait) {
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.try_emit(obs);
            if n.is_some_and(|n| self.emitted >= n) {
                self.report.complete = true;
                break;
            }
            if self.all_finished() {
                self.report.complete = self.finite && !stop_sent && self.report.errors.is_empty();
                break;
            }
            if !stop_sent && obs.should_stop() {
                self.stop.store(true, Ordering::Relaxed);
                stop_sent = true;
            }
        }
        self.report.complete
    }

    /// Stops the workers (ramp-down is over) and waits for them: from
    /// here this side counts nothing, and its flows' sockets stay open
    /// until `finish`, so a peer that has not stopped yet sees no close.
    /// Called again, it does nothing.
    pub fn halt(&mut self, obs: &mut dyn Observer) {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.all_finished() && Instant::now() < deadline {
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.try_emit(obs);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }

    /// Halts (if not yet), closes the flows' sockets and gathers their
    /// reports.
    pub fn finish(mut self, obs: &mut dyn Observer) -> SideReport {
        self.halt(obs);
        // Closed now, once every end has halted (the controller's `Close`)
        // or the peer is gone.
        self.open.clear();
        let window_cpu = self.window_cpu();
        let kernel_udp = self.window_kernel_udp();
        let service = self.window_service();
        let mut r = std::mem::take(&mut self.report);
        r.window_cpu = window_cpu;
        r.kernel_udp = kernel_udp;
        r.service = service;
        if let Some((start, end)) = self.span {
            r.window_s = end - start;
        }
        r.hist = std::mem::replace(&mut self.total_hist, new_hist());
        r.hist_corrected = std::mem::replace(&mut self.total_hist_corrected, new_hist());
        r.flows.sort_by_key(|f| f.flow);
        r.placement.sort_by_key(|p| p.worker);
        r
    }
}

/// The service's stats now (None: no service to ask, or it did not answer:
/// the edge keeps the previous reading).
fn read_stats(service: &Option<ServiceProbe>) -> Option<Stats> {
    service.as_ref()?.stats.as_ref()?.read()
}

/// The CPU snapshots at the window's edges that are still needed: the
/// first (the whole window's CPU is measured from it) and those from the
/// start of the next interval to emit on. An hour-long test with
/// one-second intervals keeps two or three, not 3,600.
#[derive(Default)]
struct CpuEdges {
    first: Option<CpuSnapshot>,
    /// Edges from `base` on (edge 0 lives in `first`).
    recent: VecDeque<CpuSnapshot>,
    base: usize,
}

impl CpuEdges {
    /// Edges taken so far, forgotten ones included.
    fn len(&self) -> usize {
        if self.first.is_some() {
            self.base + self.recent.len()
        } else {
            0
        }
    }

    fn push(&mut self, edge: CpuSnapshot) {
        if self.first.is_none() {
            self.first = Some(edge);
            self.base = 1;
        } else {
            self.recent.push_back(edge);
        }
    }

    fn last(&self) -> Option<&CpuSnapshot> {
        self.recent.back().or(self.first.as_ref())
    }

    /// Edge `i`: the first, or one not forgotten yet (a bug otherwise).
    fn get(&self, i: usize) -> &CpuSnapshot {
        if i == 0 {
            self.first.as_ref().expect("edge 0 was taken")
        } else {
            &self.recent[i - self.base]
        }
    }

    /// Drops the edges before `i`, except the first.
    fn forget_before(&mut self, i: usize) {
        while self.base < i && !self.recent.is_empty() {
            self.recent.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_edges_keep_the_first_and_the_recent_ones_only() {
        let mut e = CpuEdges::default();
        let snap = || cpu::snapshot_of(None, None);
        for _ in 0..3 {
            e.push(snap());
        }
        let first_at = e.get(0).at;
        assert_eq!(e.len(), 3);
        // Interval 0 (edges 0, 1) and 1 (edges 1, 2) emitted.
        e.forget_before(2);
        assert_eq!(e.recent.len(), 1);
        assert_eq!(e.get(2).at, e.last().unwrap().at);
        for k in 2..3600 {
            e.push(snap());
            let _ = (e.get(k), e.get(k + 1));
            e.forget_before(k + 1);
        }
        assert_eq!(e.len(), 3601);
        assert!(e.recent.len() <= 2, "{} edges kept", e.recent.len());
        assert_eq!(e.get(0).at, first_at);
        let _ = e.get(3600);
    }
}
