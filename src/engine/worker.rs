//! A worker: one thread, one epoll loop (mio), many flows (neper's thread).
//! It owns the counters and histograms its flows update, closes intervals on
//! the side's common timeline, and reports each one to the side's collector.

use mio::{Events, Poll, Token};
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::flow::{Ctx, Flow, Status};
use crate::measure::histogram::{new_hist, Hist, WaitHists};
use crate::measure::interval::Timeline;
use crate::measure::placement::{self, CpuSeen};
use crate::model::flow::FlowReport;
use crate::model::sample::{Counters, WorkerPlacement};

thread_local! {
    static ERRORS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Remembers a flow error for the result (the first few distinct ones).
pub fn note_error(e: &std::io::Error, flow: u32) {
    ERRORS.with(|v| {
        let mut v = v.borrow_mut();
        let msg = e.to_string();
        if v.len() < 8 && !v.iter().any(|m| m.ends_with(&msg)) {
            v.push(format!("flow {flow}: {msg}"));
        }
    });
}

pub enum WorkerMsg {
    Interval {
        worker: usize,
        index: usize,
        start: Instant,
        end: Instant,
        counters: Counters,
        hist: Box<Hist>,
        hist_corrected: Box<Hist>,
    },
    Finished {
        worker: usize,
        /// Intervals this worker reported.
        intervals: usize,
        flows: Vec<FlowReport>,
        placement: WorkerPlacement,
        errors: Vec<String>,
        /// A failure that stopped the worker itself (pinning, epoll).
        fatal: Option<String>,
        /// Its flows, still open: the side closes them at its finish, not
        /// when the worker ends, so a side stopped mid-window (Ctrl-C)
        /// does not close its connections before the peer is told to stop
        /// (the peer would see a reset in its window).
        open: Vec<Box<dyn Flow>>,
        /// What its own scheduling added over the window (open loops).
        waits: Box<WaitHists>,
    },
}

pub struct WorkerSetup {
    pub index: usize,
    pub flows: Vec<Box<dyn Flow>>,
    pub cpus: Option<Vec<usize>>,
    pub payload: Arc<Vec<u8>>,
    pub buf_len: usize,
    pub t0: Instant,
    pub timeline: Timeline,
    pub stop: Arc<AtomicBool>,
    pub tx: Sender<WorkerMsg>,
    /// End the worker once every persistent flow is done (finite tests).
    pub finite: bool,
    /// Busy polling: never sleep in epoll (`--spin`).
    pub spin: bool,
    /// An open loop's flows wake early and busy-poll to their due times
    /// (`--pacing hybrid`; see `timer::Lead`).
    pub hybrid: bool,
    /// `--io threads`: this worker's flow (at most one) runs on a blocking
    /// socket, with no event loop.
    pub blocking: bool,
}

/// `--io threads`: how long a blocked read or write waits before the
/// thread looks at the clock and the stop flag again. An interval edge of
/// an idle flow is late by at most this; a busy flow returns at least
/// every BUDGET bytes.
const BLOCKING_TICK: Duration = Duration::from_millis(10);

/// Why a flow is called.
#[derive(Clone, Copy)]
enum Call {
    Ready {
        readable: bool,
        writable: bool,
        peer_closed: Option<bool>,
    },
    Timer,
}

struct Slot {
    flow: Box<dyn Flow>,
    done: bool,
}

pub fn run(w: WorkerSetup) {
    super::signals::block_in_this_thread();
    let index = w.index;
    let tx = w.tx.clone();
    let nflows = w.flows.len();
    let cpus = w.cpus.clone();
    let fail = |msg: String| {
        let _ = tx.send(WorkerMsg::Finished {
            worker: index,
            intervals: 0,
            flows: Vec::new(),
            placement: WorkerPlacement {
                worker: index,
                pinned: cpus.clone(),
                allowed: placement::allowed_cpus(),
                seen: vec![],
                flows: nflows,
            },
            errors: Vec::new(),
            fatal: Some(msg),
            open: Vec::new(),
            waits: Box::default(),
        });
    };
    if let Some(c) = &w.cpus {
        if let Err(e) = placement::pin_current_thread(c) {
            return fail(e.to_string());
        }
    }
    match Worker::new(w) {
        Ok(mut worker) => worker.run(),
        Err(e) => fail(format!("worker {index}: {e}")),
    }
}

struct Worker {
    s: WorkerSetup,
    poll: Poll,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    live: usize,
    counters: Counters,
    base: Counters,
    hist: Hist,
    hist_corrected: Hist,
    waits: WaitHists,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    buf: Vec<u8>,
    seen: CpuSeen,
    next: usize,
    window_started: bool,
    interval_start: Instant,
    /// Flows that yielded with work left (Status::Busy).
    runnable: Vec<usize>,
    /// When the next warm-up or interval edge falls (None: window over).
    next_edge_at: Option<Instant>,
    /// Some flow measures what its peer received (`Flow::delivered`):
    /// false once a reading found none, so other workloads pay nothing.
    delivery: bool,
    /// Wakes the loop when a flow's timer is due, to the microsecond
    /// (epoll's own timeout is whole milliseconds).
    precise: Option<super::timer::PreciseTimer>,
    /// With `--pacing hybrid`: how long before a due timer the loop stops
    /// sleeping (None: it sleeps to the timer).
    lead: Option<super::timer::Lead>,
}

/// The precise timer's token: never a flow's.
const TIMER_TOKEN: usize = usize::MAX;

/// A flow's context over the worker's fields (a macro, not a method: the
/// caller holds a flow borrowed from `slots` meanwhile, which a `&mut self`
/// method would conflict with).
macro_rules! ctx {
    ($w:ident, $now:expr, $token:expr, $spawned:expr, $stopping:expr, $peer_closed:expr, $blocking:expr) => {
        Ctx {
            now: $now,
            token: $token,
            counters: &mut $w.counters,
            hist: &mut $w.hist,
            hist_corrected: &mut $w.hist_corrected,
            waits: &mut $w.waits,
            buf: &mut $w.buf,
            payload: &$w.s.payload,
            registry: $w.poll.registry(),
            timers: &mut $w.timers,
            spawned: $spawned,
            stopping: $stopping,
            counting: $w.window_started && !$stopping,
            peer_closed: $peer_closed,
            blocking: $blocking,
        }
    };
}

impl Worker {
    fn new(mut s: WorkerSetup) -> std::io::Result<Self> {
        let poll = Poll::new()?;
        let mut slots = Vec::with_capacity(s.flows.len());
        let mut live = 0;
        for (i, mut flow) in s.flows.drain(..).enumerate() {
            flow.register(poll.registry(), Token(i))?;
            live += 1;
            slots.push(Some(Slot { flow, done: false }));
        }
        let buf = vec![0u8; s.buf_len];
        let t0 = s.t0;
        let s_warmup = s.timeline.warmup;
        Ok(Worker {
            s,
            poll,
            slots,
            free: Vec::new(),
            live,
            counters: Counters::default(),
            base: Counters::default(),
            hist: new_hist(),
            hist_corrected: new_hist(),
            waits: WaitHists::default(),
            timers: BinaryHeap::new(),
            buf,
            seen: CpuSeen::default(),
            next: 0,
            window_started: false,
            interval_start: t0,
            // Every flow gets a first call: crr connectors open their first
            // connection there, requesters send their first requests.
            runnable: (0..live).collect(),
            next_edge_at: Some(t0 + s_warmup),
            delivery: true,
            precise: None,
            lead: None,
        })
    }

    /// Sets `counters.bytes_delivered` to what the flows' peers have
    /// received so far (never lower than before, so intervals never go
    /// negative). Called at the window's start and at each edge, when the
    /// other counters are cut.
    fn read_delivered(&mut self) {
        if !self.delivery {
            return;
        }
        let mut any = false;
        let mut sum = 0u64;
        for slot in self.slots.iter_mut().flatten() {
            if let Some(d) = slot.flow.delivered() {
                any = true;
                sum += d;
            }
        }
        self.delivery = any;
        self.counters.bytes_delivered = self.counters.bytes_delivered.max(sum);
    }

    fn emit(&mut self, end: Instant) {
        self.read_delivered();
        let counters = self.counters - self.base;
        self.base = self.counters;
        let hist = std::mem::replace(&mut self.hist, new_hist());
        let hist_corrected = std::mem::replace(&mut self.hist_corrected, new_hist());
        let _ = self.s.tx.send(WorkerMsg::Interval {
            worker: self.s.index,
            index: self.next,
            start: self.interval_start,
            end,
            counters,
            hist: Box::new(hist),
            hist_corrected: Box::new(hist_corrected),
        });
        self.next += 1;
        self.interval_start = end;
    }

    /// Closes every interval whose edge has passed. Returns true while the
    /// window is still open (or not yet started).
    fn advance(&mut self, now: Instant) -> bool {
        let in_window = self.advance_edges(now);
        self.next_edge_at = if !self.window_started {
            Some(self.s.t0 + self.s.timeline.warmup)
        } else {
            self.s.timeline.edge(self.next).map(|e| self.s.t0 + e)
        };
        in_window
    }

    fn advance_edges(&mut self, now: Instant) -> bool {
        let t0 = self.s.t0;
        if !self.window_started {
            if now < t0 + self.s.timeline.warmup {
                return true;
            }
            self.window_started = true;
            self.read_delivered();
            self.base = self.counters;
            self.hist.reset();
            self.hist_corrected.reset();
            self.waits.reset();
            self.interval_start = now;
        }
        while let Some(edge) = self.s.timeline.edge(self.next) {
            if now < t0 + edge {
                return true;
            }
            self.seen.sample();
            self.emit(now);
        }
        false
    }

    /// How long epoll may sleep: not past the next edge or timer (with a
    /// lead, not past the lead before it, and not at all within it), not at
    /// all while flows wait to be re-run, and at most 20 ms (the stop flag).
    fn timeout(&self, now: Instant) -> Duration {
        if !self.runnable.is_empty() || self.s.spin {
            return Duration::ZERO;
        }
        let mut until = now + Duration::from_millis(20);
        if let Some(e) = self.next_edge_at {
            until = until.min(e);
        }
        if let Some(Reverse((at, _))) = self.timers.peek() {
            until = until.min(self.wake_for(*at));
        }
        until.saturating_duration_since(now)
    }

    /// When to wake for a timer due at `at`: the lead before it.
    fn wake_for(&self, at: Instant) -> Instant {
        match &self.lead {
            Some(l) => at.checked_sub(l.get()).unwrap_or(at),
            None => at,
        }
    }

    fn dispatch(
        &mut self,
        token: usize,
        call: Call,
        now: Instant,
        stopping: bool,
        spawned: &mut Vec<Box<dyn Flow>>,
    ) {
        let Some(Some(slot)) = self.slots.get_mut(token) else {
            return;
        };
        if slot.done {
            return;
        }
        let peer_closed = match call {
            Call::Ready { peer_closed, .. } => peer_closed,
            Call::Timer => None,
        };
        let mut cx = ctx!(
            self,
            now,
            Token(token),
            spawned,
            stopping,
            peer_closed,
            self.s.blocking
        );
        let status = match call {
            Call::Timer => slot.flow.timer(&mut cx),
            Call::Ready {
                readable, writable, ..
            } => slot.flow.ready(&mut cx, readable, writable),
        };
        match status {
            Status::Open => {}
            Status::Busy => self.runnable.push(token),
            Status::Done => self.retire(token, None, stopping),
            Status::Failed(e) => self.retire(token, Some(e), stopping),
        }
    }

    fn retire(&mut self, token: usize, err: Option<std::io::Error>, stopping: bool) {
        let Some(Some(slot)) = self.slots.get_mut(token) else {
            return;
        };
        if let Some(e) = &err {
            // Told to stop (the test ended early: auto settled, a Ctrl-C):
            // the peer, told too, may close first; that is the end, not
            // an error of the window.
            if !stopping && !self.s.stop.load(Ordering::Relaxed) {
                self.counters.errors += 1;
                note_error(e, token as u32);
            }
        }
        if slot.flow.persistent() {
            slot.done = true;
            self.live -= 1;
        } else {
            self.slots[token] = None;
            self.free.push(token);
        }
    }

    /// `--io threads`: the flow's socket blocks, and the thread calls the
    /// flow again whenever it returns (data moved, a timeout, its budget
    /// used), checking the interval edges and the stop flag in between.
    /// One send and one receive per rr exchange, as netperf's loop. Flows a
    /// flow spawns (a crr acceptor's connection, already blocking) are
    /// served at once, to their end, before it is called again: a serial
    /// server, as netserver is. A timer a flow sets (a back-off after an
    /// error) is waited for, not run over.
    fn run_blocking(&mut self) -> Option<String> {
        if self.slots.len() > 1 {
            return Some(format!(
                "worker {}: --io threads runs one flow per thread, this one has {}",
                self.s.index,
                self.slots.len()
            ));
        }
        if let Some(Some(slot)) = self.slots.get_mut(0) {
            if let Err(e) = slot.flow.set_blocking(BLOCKING_TICK) {
                return Some(format!("--io threads: {e}"));
            }
        }
        let mut spawned: Vec<Box<dyn Flow>> = Vec::new();
        let mut loops: u64 = 0;
        loop {
            let now = Instant::now();
            let in_window = self.advance(now);
            let stopping = !in_window;
            if self.s.stop.load(Ordering::Relaxed) || (self.s.finite && self.live == 0) {
                if self.window_started && self.s.timeline.edge(self.next).is_some() {
                    self.emit(now);
                }
                return None;
            }
            self.runnable.clear();
            if let Some(&Reverse((at, tok))) = self.timers.peek() {
                if at <= now {
                    self.timers.pop();
                    self.dispatch(tok, Call::Timer, now, stopping, &mut spawned);
                } else {
                    std::thread::sleep(self.timeout(now));
                    continue;
                }
            } else if self.live == 0 {
                // Done (an agent's end of a finite transfer): wait for stop.
                std::thread::sleep(Duration::from_millis(2).min(self.timeout(now)));
                continue;
            } else {
                let call = Call::Ready {
                    readable: true,
                    writable: true,
                    peer_closed: None,
                };
                self.dispatch(0, call, now, stopping, &mut spawned);
            }
            for mut flow in spawned.drain(..) {
                let status = loop {
                    let mut none = Vec::new();
                    let mut cx = ctx!(
                        self,
                        Instant::now(),
                        Token(usize::MAX),
                        &mut none,
                        stopping,
                        None,
                        true
                    );
                    match flow.ready(&mut cx, true, true) {
                        Status::Open | Status::Busy if !self.s.stop.load(Ordering::Relaxed) => {}
                        other => break other,
                    }
                };
                if let Status::Failed(e) = status {
                    if !stopping {
                        self.counters.errors += 1;
                        note_error(&e, 0);
                    }
                }
            }
            loops += 1;
            if loops.is_multiple_of(64) {
                self.seen.sample();
            }
        }
    }

    fn run(&mut self) {
        if self.s.blocking {
            let fatal = self.run_blocking();
            return self.finish(fatal);
        }
        let mut events = Events::with_capacity(1024);
        // Flows on a schedule (an open loop) wake on their timers to the
        // microsecond; others never arm one and pay nothing.
        let scheduled = self.slots.iter().flatten().any(|s| s.flow.scheduled());
        if scheduled && !self.s.spin {
            super::timer::tight_slack();
            self.precise =
                super::timer::PreciseTimer::new(self.poll.registry(), Token(TIMER_TOKEN)).ok();
            if self.s.hybrid {
                self.lead = Some(super::timer::Lead::default());
            }
        }
        let mut spawned: Vec<Box<dyn Flow>> = Vec::new();
        // Tokens of flows spawned in this batch (kept: no allocation per batch).
        let mut fresh: Vec<usize> = Vec::new();
        let mut loops: u64 = 0;
        let finite = self.s.finite;
        let mut fatal = None;
        loop {
            let now = Instant::now();
            let in_window = self.advance(now);
            let stopping = !in_window;
            if self.s.stop.load(Ordering::Relaxed) || (finite && self.live == 0) {
                if self.window_started && self.s.timeline.edge(self.next).is_some() {
                    self.emit(now);
                }
                break;
            }
            while let Some(&Reverse((at, tok))) = self.timers.peek() {
                if at > now {
                    break;
                }
                self.timers.pop();
                self.dispatch(tok, Call::Timer, now, stopping, &mut spawned);
            }
            let iter_start = now;
            let timeout = self.timeout(now);
            // Within a lead of a due timer: poll without sleeping.
            let spinning = timeout.is_zero()
                && self.runnable.is_empty()
                && !self.s.spin
                && self.lead.is_some();
            if timeout > Duration::ZERO {
                let next = self.timers.peek().map(|Reverse((at, _))| *at);
                if let (Some(at), Some(_)) = (next, &self.precise) {
                    let wake = self.wake_for(at);
                    if wake < now + timeout + Duration::from_micros(1) {
                        if let Some(t) = &mut self.precise {
                            t.arm(wake, now);
                        }
                    }
                }
            }
            if let Err(e) = super::wait::events(&mut self.poll, &mut events, timeout) {
                fatal = Some(format!("epoll failed: {e}"));
                break;
            }
            let mut now = Instant::now();
            if spinning {
                self.counters.pacing_spin_ns +=
                    now.saturating_duration_since(iter_start).as_nanos() as u64;
            }
            if let Some(t) = &mut self.precise {
                if events.iter().any(|ev| ev.token().0 == TIMER_TOKEN) {
                    if let (Some(armed), Some(l)) = (t.armed(), &mut self.lead) {
                        l.observe(now.saturating_duration_since(armed));
                    }
                    t.drain();
                }
            }
            let runnable = std::mem::take(&mut self.runnable);
            let ready = runnable.into_iter().map(|t| (t, true, true, None)).chain(
                events
                    .iter()
                    .filter(|ev| ev.token().0 != TIMER_TOKEN)
                    .map(|ev| {
                        let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                        let writable = ev.is_writable() || ev.is_write_closed() || ev.is_error();
                        (ev.token().0, readable, writable, Some(ev.is_read_closed()))
                    }),
            );
            for (tok, readable, writable, peer_closed) in ready {
                self.dispatch(
                    tok,
                    Call::Ready {
                        readable,
                        writable,
                        peer_closed,
                    },
                    now,
                    stopping,
                    &mut spawned,
                );
                // The end of the test is seen after each flow, not after the
                // batch: a batch over thousands of busy flows takes a while.
                if self.s.stop.load(Ordering::Relaxed) {
                    break;
                }
                // Likewise the interval edges are kept exact by looking at
                // the clock after each flow.
                now = Instant::now();
                if self.next_edge_at.is_some_and(|e| now >= e) {
                    self.advance(now);
                }
            }
            // Flows born in this batch (accepted connections) get a first
            // call at once: what they wait for has often arrived with the
            // connection (a crr request follows the handshake), and a flow
            // that finishes now is closed before epoll reports it, which
            // saves a wake-up per connection.
            while !spawned.is_empty() {
                fresh.clear();
                for mut flow in spawned.drain(..) {
                    let token = match self.free.pop() {
                        Some(t) => t,
                        None => {
                            self.slots.push(None);
                            self.slots.len() - 1
                        }
                    };
                    if flow.register(self.poll.registry(), Token(token)).is_ok() {
                        self.slots[token] = Some(Slot { flow, done: false });
                        fresh.push(token);
                    } else {
                        self.free.push(token);
                    }
                }
                for &tok in &fresh {
                    let first = Call::Ready {
                        readable: true,
                        writable: true,
                        peer_closed: None,
                    };
                    self.dispatch(tok, first, now, stopping, &mut spawned);
                }
            }
            loops += 1;
            if loops.is_multiple_of(64) {
                self.seen.sample();
            }
        }
        self.finish(fatal);
    }

    /// Reports the flows, the placement and any errors: the worker's end.
    fn finish(&mut self, fatal: Option<String>) {
        let flows: Vec<FlowReport> = self
            .slots
            .iter()
            .flatten()
            .filter_map(|s| s.flow.report())
            .map(|mut r| {
                r.worker = self.s.index;
                r
            })
            .collect();
        let placement = WorkerPlacement {
            worker: self.s.index,
            pinned: self.s.cpus.clone(),
            allowed: placement::allowed_cpus(),
            seen: self.seen.shares(),
            flows: flows.len(),
        };
        let errors = ERRORS.with(|v| std::mem::take(&mut *v.borrow_mut()));
        let open = self.slots.drain(..).flatten().map(|s| s.flow).collect();
        let _ = self.s.tx.send(WorkerMsg::Finished {
            worker: self.s.index,
            intervals: self.next,
            flows,
            placement,
            errors,
            fatal,
            open,
            waits: Box::new(std::mem::take(&mut self.waits)),
        });
    }
}
