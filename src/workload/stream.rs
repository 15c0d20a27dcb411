//! `stream`: bulk transfer (netperf TCP_STREAM / TCP_MAERTS, iperf3).
//! A sender writes `message`-sized chunks until the socket would block; a
//! receiver reads until it would block. Both at once for `bidir`.
//! Zero-copy sends use sendfile(2) from a memfd holding one message, so the
//! payload pages are never copied from user space.

use mio::{Registry, Token};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;

use super::kind::KindFacts;
use super::RateColumn;
use super::{base, rr, Conns, Pattern, Plugin, WorkloadError};
use crate::engine::flow::{Ctx, Flow, FlowBase, Io, ReadStep, Status, BUDGET};
use crate::model::flow::FlowReport;
use crate::model::spec::Figures;
use crate::model::spec::{self, Direction, MainMetric, Per, TestSpec};
use crate::units::fmt_bytes;

/// Bulk transfer: continuous (`message`-sized writes for the window), or
/// finite (`--bytes`: a request/response of that size, once per flow or
/// repeated with `--per transaction`).
pub struct Stream;

/// This kind's name in a spec, on the command line and in the registry.
pub const NAME: spec::Workload = spec::Workload::named("stream");

impl Plugin for Stream {
    fn facts(&self) -> KindFacts {
        KindFacts {
            bulk: true,
            transfer: true,
            zerocopy: true,
            exact_window: true,
            threads: true,
            worker_per_flow: true,
            one_way_payload: true,
            rx_poll: true,
            ..KindFacts::NONE
        }
    }

    fn rules(&self, spec: &TestSpec) -> Result<(), crate::model::error::Invalid> {
        if spec.io == spec::IoMode::Threads && spec.direction == Direction::Bidir {
            return Err("--io threads runs stream (tx or rx), closed-loop rr and crr, not a bidir stream (one thread cannot block on its reads and its writes at once): use --io epoll".into());
        }
        let asked_to_poll = spec.rx_poll_us.is_some_and(|us| us > 0);
        if asked_to_poll && spec.flows > spec.workers.min(spec.agent_workers) {
            return Err("--rx-poll polls a receiver that has its worker to itself: one flow per worker (--workers, --agent-workers), or --spin".into());
        }
        if asked_to_poll && spec.direction == Direction::Bidir {
            return Err("--rx-poll polls a flow that only receives, not a bidir stream".into());
        }
        Ok(())
    }

    fn kind(&self) -> spec::Workload {
        NAME
    }

    fn help(&self) -> &'static str {
        "Bulk transfer (netperf TCP_STREAM / TCP_MAERTS)"
    }

    fn pattern(&self) -> Pattern {
        Pattern::Persistent
    }

    /// A continuous stream's latency is not a transaction's: only a finite
    /// transfer (one request of `--bytes`) has one. A continuous clear-text
    /// stream counts its bytes where they reached the receiver (see
    /// `Figures::delivered`).
    fn figures(&self, spec: &TestSpec) -> Figures {
        Figures {
            latency: spec.bytes.is_some(),
            delivered: spec.bytes.is_none() && spec.tls.is_none(),
            ..Figures::default()
        }
    }

    fn describe(&self, spec: &TestSpec) -> String {
        let dir = super::direction_words(spec.direction);
        match spec.bytes {
            Some(b) => format!(
                "stream {dir}, {} per {}, reply {}",
                fmt_bytes(b),
                format!("{:?}", spec.per).to_lowercase(),
                fmt_bytes(spec.reply)
            ),
            None => format!(
                "stream {dir}, {} writes, {} reads",
                fmt_bytes(spec.message as u64),
                fmt_bytes(spec.effective_read_size() as u64)
            ),
        }
    }

    /// A finite transfer is a transaction; a continuous stream has none.
    fn rate_column(&self, spec: &TestSpec) -> RateColumn {
        match spec.bytes {
            Some(_) => RateColumn::Transactions,
            None => RateColumn::None,
        }
    }

    fn main_metric(&self, spec: &TestSpec) -> MainMetric {
        if spec.bytes.is_none() || spec.per == Per::Flow {
            MainMetric::Throughput
        } else {
            MainMetric::TransactionRate
        }
    }

    fn client_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        flows(spec, conns, false)
    }

    fn agent_flows(
        &self,
        spec: &TestSpec,
        conns: Conns,
    ) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
        flows(spec, conns, true)
    }
}

/// One side's flows. A finite transfer is a transaction: the client asks
/// for (or sends) `bytes`, the other end answers with `reply` bytes.
fn flows(spec: &TestSpec, conns: Conns, agent: bool) -> Result<Vec<Box<dyn Flow>>, WorkloadError> {
    let mut out: Vec<Box<dyn Flow>> = Vec::with_capacity(conns.established.len());
    if let Some((request, response)) = transaction(spec) {
        for c in conns.established {
            let b = base(spec, agent, c);
            out.push(if agent {
                Box::new(rr::Responder::new(b, request, response))
            } else {
                let count = (spec.per == Per::Flow).then_some(1);
                Box::new(rr::Requester::new(b, request, response, 1, count, None))
            });
        }
        return Ok(out);
    }
    let (send, recv) = directions(spec, agent);
    let poll = rx_poll(spec);
    let zerocopy = match send && spec.zerocopy {
        true => Some(Arc::new(
            ZeroCopySource::new(spec.message).map_err(WorkloadError::ZeroCopy)?,
        )),
        false => None,
    };
    for c in conns.established {
        out.push(Box::new(StreamFlow::new(
            base(spec, agent, c),
            spec.message,
            send,
            recv,
            zerocopy.clone(),
            poll,
        )));
    }
    Ok(out)
}

/// What `--rx-poll auto` polls: long enough to catch the next burst of a
/// fast stream (20, 50 and 200 µs measured alike on loopback, 1.6x the
/// sleeping receiver's rate under bbr), short enough that a miss costs
/// little.
pub const AUTO_RX_POLL_US: u32 = 20;

/// How long this end's receiving thread polls an empty socket before it
/// sleeps (None: it sleeps at once). `auto` polls only where the poll
/// takes no CPU from the test itself: one flow (a sender and a receiver,
/// both ends of a loopback test on two CPUs), a host where the receiver
/// has another CPU beside it, and the two ends not pinned to a common CPU.
/// With four flows on two CPUs, polling receivers halved the rate. Not
/// under TLS: a receiver that decrypts polled to 0.93x of one that sleeps
/// (its clear twin then sleeps too, see `controller::run::clear_baseline`).
pub fn rx_poll(spec: &TestSpec) -> Option<std::time::Duration> {
    let us = match spec.rx_poll_us {
        Some(0) => return None,
        Some(us) => us,
        None => {
            let apart = match (&spec.cpus, &spec.agent_cpus) {
                (Some(a), Some(b)) => !a.iter().any(|c| b.contains(c)),
                _ => true,
            };
            let cpus = crate::measure::placement::allowed_cpus().len();
            let lone = spec.flows == 1 && spec.direction != Direction::Bidir;
            if !lone || cpus < 2 || !apart || spec.tls.is_some() {
                return None;
            }
            AUTO_RX_POLL_US
        }
    };
    Some(std::time::Duration::from_micros(u64::from(us)))
}

/// Whether this end (`agent` or the client) sends and receives payload.
fn directions(spec: &TestSpec, agent: bool) -> (bool, bool) {
    let client_sends = spec.direction != Direction::Rx;
    let client_recvs = spec.direction != Direction::Tx;
    if agent {
        (client_recvs, client_sends)
    } else {
        (client_sends, client_recvs)
    }
}

/// A finite transfer's request and response sizes (None: continuous).
pub fn transaction(spec: &TestSpec) -> Option<(u64, u64)> {
    let n = spec.bytes?;
    Some(if spec.direction == Direction::Rx {
        (spec.reply, n)
    } else {
        (n, spec.reply)
    })
}

/// One message worth of payload in a memfd, for sendfile.
pub struct ZeroCopySource {
    file: File,
    len: usize,
}

impl ZeroCopySource {
    pub fn new(len: usize) -> io::Result<Self> {
        // SAFETY: memfd_create with a static name; we own the returned fd.
        let fd = unsafe { libc::memfd_create(c"linerate-payload".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut file = unsafe { File::from_raw_fd(fd) };
        let chunk = vec![0x5au8; len.min(1 << 20)];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            file.write_all(&chunk[..n])?;
            left -= n;
        }
        Ok(ZeroCopySource { file, len })
    }
}

pub struct StreamFlow {
    base: FlowBase,
    message: usize,
    send: bool,
    recv: bool,
    /// Bytes of the current message already written.
    offset: usize,
    zerocopy: Option<Arc<ZeroCopySource>>,
}

impl StreamFlow {
    pub fn new(
        base: FlowBase,
        message: usize,
        send: bool,
        recv: bool,
        zerocopy: Option<Arc<ZeroCopySource>>,
        poll: Option<std::time::Duration>,
    ) -> Self {
        let mut base = base;
        if let Some(limit) = poll.filter(|_| recv && !send) {
            base.set_polling(limit);
        }
        StreamFlow {
            base,
            message,
            send,
            recv,
            offset: 0,
            zerocopy,
        }
    }

    fn send_once(&mut self, payload: &[u8]) -> io::Result<Io> {
        let want = self.message - self.offset;
        if let Some(zc) = &self.zerocopy {
            let mut off = self.offset as libc::off_t;
            let n = want.min(zc.len - self.offset);
            // SAFETY: both fds are open; the kernel advances `off`.
            let rc = unsafe {
                libc::sendfile(
                    self.base.stream.as_raw_fd(),
                    zc.file.as_raw_fd(),
                    &mut off,
                    n,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(Io::Blocked),
                    io::ErrorKind::Interrupted => Ok(Io::Moved(0)),
                    _ => Err(e),
                };
            }
            return Ok(if rc == 0 {
                Io::Eof
            } else {
                Io::Moved(rc as usize)
            });
        }
        let n = want.min(payload.len());
        self.base.send(&payload[..n])
    }
}

impl StreamFlow {
    fn step(&mut self, cx: &mut Ctx<'_>, readable: bool, writable: bool) -> io::Result<Status> {
        let mut busy = false;
        if self.recv && readable {
            let mut moved = 0;
            loop {
                match self.base.read_step(cx, &mut moved)? {
                    // A bulk receiver drains to EAGAIN: more has often
                    // arrived by the next read (skipping it measured 0.97x).
                    ReadStep::Data(_) | ReadStep::Last(_) => {}
                    ReadStep::Blocked => break,
                    ReadStep::Eof => return Ok(Status::Done),
                    ReadStep::Budget => {
                        busy = true;
                        break;
                    }
                }
            }
        }
        if self.send && writable {
            let mut moved = 0;
            loop {
                if moved >= BUDGET {
                    busy = true;
                    break;
                }
                match self.send_once(cx.payload)? {
                    Io::Moved(n) => {
                        moved += n;
                        self.base.sent(cx, n);
                        self.offset = (self.offset + n) % self.message;
                    }
                    Io::Blocked => {
                        self.base
                            .window
                            .blocked(self.base.stream.as_raw_fd(), cx.now);
                        break;
                    }
                    Io::Eof => return Ok(Status::Done),
                }
            }
        }
        Ok(if busy { Status::Busy } else { Status::Open })
    }
}

impl Flow for StreamFlow {
    fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.base.register(registry, token)
    }

    fn ready(&mut self, cx: &mut Ctx<'_>, readable: bool, writable: bool) -> Status {
        match self.step(cx, readable, writable) {
            Ok(s) => s,
            Err(e) => Status::Failed(e),
        }
    }

    fn report(&self) -> Option<FlowReport> {
        Some(self.base.report())
    }

    fn persistent(&self) -> bool {
        true
    }

    /// A clear-text sender counts what its peer received (TLS: the kernel's
    /// bytes are records, not payload, so the receiver's reads count).
    fn delivered(&mut self) -> Option<u64> {
        (self.send && self.base.tls.is_none()).then(|| self.base.delivered())
    }

    fn set_blocking(&mut self, tick: std::time::Duration) -> io::Result<()> {
        if self.send && self.recv {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a bidir flow reads and writes at once (--io epoll)",
            ));
        }
        if self.base.poll_then_sleep(tick) {
            return Ok(());
        }
        self.base.set_blocking(tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_ends_mirror_each_other() {
        let mut s = TestSpec::default();
        assert_eq!(directions(&s, false), (true, false));
        assert_eq!(directions(&s, true), (false, true));
        s.direction = Direction::Rx;
        assert_eq!(directions(&s, false), (false, true));
        s.direction = Direction::Bidir;
        assert_eq!(directions(&s, true), (true, true));
        assert_eq!(transaction(&s), None);
    }

    #[test]
    fn a_finite_stream_is_a_transaction() {
        let mut s = TestSpec {
            bytes: Some(20 << 20),
            ..Default::default()
        };
        assert!(s.is_finite());
        assert_eq!(transaction(&s), Some((20 << 20, 20)));
        assert_eq!(Stream.main_metric(&s), MainMetric::Throughput);
        s.direction = Direction::Rx;
        s.per = Per::Transaction;
        assert!(!s.is_finite());
        assert_eq!(transaction(&s), Some((20, 20 << 20)));
        assert_eq!(Stream.main_metric(&s), MainMetric::TransactionRate);
    }
}
