//! The user-space delay element: the kernel in the router namespace forwards
//! packets, iptables hands each one to NFQUEUE (one queue per direction), and
//! this loop releases it after
//! `max(arrival, last_departure) + wire_bytes / rate + delay`.
//! Never fail open: without a listener the kernel drops queued packets.
//!
//! [`Link`] is the model of one direction, pure and tested exactly; [`run`]
//! is the I/O around it. Release times are monotonic per direction and each
//! direction has its own queue, so a direction is a FIFO: a wake-up releases
//! every due packet with one batch verdict naming the highest due id.
//! Dropped packets get their verdict at arrival, so they are never pending.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::aqm::{self, Scheduler};
use super::error::{EmulatorError, OsText};
use super::nfqueue::{self, Packet, Socket, Stamp, Verdicts};
use super::wire::{self, Held, Wire};
use crate::model::lab::{Aqm, DirStats};

/// The mark a released packet carries when the queue discipline marked it
/// CE: an iptables rule in the router's mangle POSTROUTING chain (after the
/// queue) sets the ECN bits of marked packets (see `topology`). A payload
/// rewrite through NFQUEUE would need the whole packet copied to user
/// space and breaks checksum offload; the TOS target fixes the IPv4
/// header checksum and touches nothing else.
pub const ECN_MARK: u32 = 0x0001_0000;

/// What one direction of the link does to the packets that cross it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Shaping {
    /// One-way delay added to every packet, microseconds.
    pub delay_us: u64,
    /// Extra random delay, uniform in 0..=jitter_us, never reordering.
    pub jitter_us: u64,
    /// Bottleneck rate in bits/s on the wire (IP length + 38 B per packet); None: unlimited.
    pub rate_bps: Option<u64>,
    /// Drop-tail limit on the bytes waiting for the bottleneck; None: unlimited.
    pub queue_limit_bytes: Option<u64>,
    /// Bernoulli loss probability, 0..1.
    pub loss: f64,
    /// The queue discipline in front of the bottleneck (FIFO: drop-tail).
    #[serde(default)]
    pub aqm: Aqm,
}

/// Everything the emulator process needs; passed as JSON by `lab up`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Config {
    /// NFQUEUE numbers: [client->server, server->client].
    pub queues: [u16; 2],
    /// Shaping for [client->server, server->client].
    pub shaping: [Shaping; 2],
    /// Ask for single packets (no GSO super-packets); needed with loss.
    pub per_packet: bool,
    /// The link MTU, to count wire bytes of GSO super-packets per segment.
    pub mtu: u32,
    /// Where to write the counters (JSON, atomically, about every 100 ms and at exit).
    pub stats: Option<PathBuf>,
    /// Seed of the loss/jitter generator (0: random).
    pub seed: u64,
    /// Pin the emulator (all its threads) to this CPU.
    #[serde(default)]
    pub cpu: Option<usize>,
}

/// What the stats file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub pid: u32,
    pub dirs: [DirStats; 2],
    /// CPU time of the emulator process, user + system, seconds.
    pub cpu_s: f64,
    /// Seconds since the emulator started.
    pub uptime_s: f64,
    /// The packet loop ran under SCHED_FIFO at this write (on while it uses
    /// less than half a core; see `Priority` for why).
    #[serde(default)]
    pub realtime: bool,
}

/// Ethernet framing per frame: preamble + SFD 8, header 14, FCS 4, inter-frame gap 12.
pub const FRAMING_BYTES: u64 = 38;
/// Headers each segment of a GSO super-packet repeats, when the packet's own
/// cannot be read: IPv4 20 + TCP 20 + timestamps option 12.
pub const DEFAULT_SEGMENT_HEADER: u32 = 52;
/// The loop wakes at least this often (stop flag) and writes counters this often.
const TICK: Duration = Duration::from_millis(100);
/// How often (ns) a queue that is not watched (see `HalfLink::wants_arrivals`)
/// is read anyway when nothing else wakes the loop: keeps its kernel
/// backlog small under a flood into a slow link.
const UNWATCHED_READ_NS: u64 = 2_000_000;
/// Kernel timestamps older than this at the read are ignored (see `HalfLink::receive`).
const STAMP_TRUST_NS: u64 = 1_000_000_000;
/// The most a release may come before its scheduled time (see [`release_window_ns`]).
pub const RELEASE_WINDOW_MAX_NS: u64 = 250_000;
/// `recvmmsg` rounds (64 datagrams each) per wake-up, both queues together:
/// bounded so that a flood of arrivals cannot starve releases.
const RECV_ROUNDS: usize = 32;

/// Size on the wire of one queued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireSize {
    /// Frames this packet becomes on the wire (1 unless a GSO super-packet).
    pub segments: u32,
    /// Bytes these frames take on the wire, framing included.
    pub wire_bytes: u64,
}

/// Wire size of a packet of `ip_len` IP bytes whose headers (IP + transport)
/// take `hdr` bytes, on a link of `mtu`.
///
/// A packet longer than the MTU is a GSO super-packet (only seen when not
/// per-packet): it is cut into `segments = ceil((ip_len - hdr) / (mtu - hdr))`
/// frames (at least 1), each carrying its own copy of the headers, so
/// `wire_bytes = ip_len + 38 * segments + hdr * (segments - 1)`. With TCP
/// timestamps `hdr` is 52 and a full segment takes exactly mtu + 38 bytes.
/// For a packet that fits the MTU this is `ip_len + 38`.
pub fn wire_size(ip_len: u32, hdr: u32, mtu: u32) -> WireSize {
    let payload = u64::from(ip_len.saturating_sub(hdr));
    let per_segment = u64::from(mtu.saturating_sub(hdr).max(1));
    let segments = payload.div_ceil(per_segment).max(1);
    let segments = u32::try_from(segments).unwrap_or(u32::MAX);
    let s = u64::from(segments);
    WireSize {
        segments,
        wire_bytes: u64::from(ip_len) + FRAMING_BYTES * s + u64::from(hdr) * (s - 1),
    }
}

/// Length of the IP + TCP/UDP headers at the start of a packet; None when
/// they cannot be read from the copied bytes (then [`DEFAULT_SEGMENT_HEADER`] applies).
pub fn header_len(head: &[u8]) -> Option<u32> {
    let (ip_len, proto) = match head.first()? >> 4 {
        4 => {
            let ihl = usize::from(head[0] & 0x0f) * 4;
            if ihl < 20 || head.len() < ihl {
                return None;
            }
            (ihl, head[9])
        }
        6 if head.len() >= 40 => (40, head[6]),
        _ => return None,
    };
    match proto {
        6 => {
            let doff = usize::from(head.get(ip_len + 12)? >> 4) * 4;
            (doff >= 20).then_some((ip_len + doff) as u32)
        }
        17 => Some((ip_len + 8) as u32),
        _ => None,
    }
}

/// A small, fast generator for loss and jitter (splitmix64): reproducible
/// from a seed, no dependency; statistical quality is ample for Bernoulli draws.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..=n (multiply-shift; the bias is below 2^-64 * n).
    fn upto(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * (u128::from(n) + 1)) >> 64) as u64
    }
}

/// What the link does with one arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Random loss: drop at arrival.
    DropLoss,
    /// The bottleneck queue is full (drop-tail): drop at arrival.
    DropQueue,
    /// Hold until `release_ns`.
    Release {
        /// When the last bit leaves the bottleneck.
        departure_ns: u64,
        /// When to hand it back to the kernel: departure + delay + jitter,
        /// never before the previous release of this direction.
        release_ns: u64,
        /// Wire bytes waiting for the bottleneck, this packet included.
        queue_bytes: u64,
        /// How long it waits for the bottleneck (arrival to start of transmission).
        wait_ns: u64,
    },
}

/// One direction of the emulated link, as a pure function of arrival times
/// (nanoseconds on any monotonic clock) and sizes: no I/O, so it can be
/// tested exactly.
///
/// The bottleneck serialises packets back to back at `rate_bps` (wire
/// bytes, framing included): a packet arriving at `a` departs at
/// `d = max(a, previous departure) + wire_bytes * 8 / rate` (at `a` without a
/// rate). The bytes waiting for it are the work left, `(previous departure -
/// a) * rate / 8`; a packet that would take them over `queue_limit_bytes` is
/// dropped (drop-tail), except at an empty queue, which accepts any packet
/// (a GSO super-packet may be bigger than a small limit on its own). Without
/// a rate nothing waits, so nothing is dropped for the queue. Random loss is
/// drawn first (a lost packet takes no bottleneck time); with GSO a loss
/// removes a whole super-packet, which is why loss wants per-packet mode.
/// Release is `d + delay + jitter` (jitter uniform in 0..=jitter), clamped
/// to the previous release so that a direction never reorders.
#[derive(Clone, Debug)]
pub struct Link {
    delay_ns: u64,
    jitter_ns: u64,
    rate_bps: Option<u64>,
    queue_limit: Option<u64>,
    loss: f64,
    mtu: u32,
    /// When the bottleneck finishes the last accepted packet.
    busy_until: u64,
    /// Remainder of `bits * 1e9 / rate` carried between back-to-back
    /// packets, so rounding to whole nanoseconds never drifts the rate.
    carry: u128,
    last_release: u64,
    rng: Rng,
}

impl Link {
    /// A link with the given shaping; Err on values that make no sense.
    pub fn new(s: &Shaping, mtu: u32, seed: u64) -> Result<Link, EmulatorError> {
        if !(0.0..=1.0).contains(&s.loss) {
            return Err(EmulatorError::Loss(s.loss));
        }
        if s.rate_bps == Some(0) {
            return Err(EmulatorError::ZeroRate);
        }
        if !(68..=65535).contains(&mtu) {
            return Err(EmulatorError::Mtu(mtu));
        }
        let ns = |us: u64, what: &'static str| {
            us.checked_mul(1000)
                .filter(|v| *v < u64::MAX / 4)
                .ok_or(EmulatorError::TooLarge { what, us })
        };
        Ok(Link {
            delay_ns: ns(s.delay_us, "delay_us")?,
            jitter_ns: ns(s.jitter_us, "jitter_us")?,
            rate_bps: s.rate_bps,
            queue_limit: s.queue_limit_bytes,
            loss: s.loss,
            mtu,
            busy_until: 0,
            carry: 0,
            last_release: 0,
            rng: Rng(seed),
        })
    }

    /// The bottleneck did not send for `ns` (the emulator ran late and its
    /// wire sat idle, see `wire`): later packets wait that much longer, and
    /// the queue counts them.
    pub fn pause(&mut self, ns: u64) {
        self.busy_until = self.busy_until.saturating_add(ns);
    }

    /// Wire bytes still waiting for the bottleneck at `now_ns`.
    pub fn queue_bytes(&self, now_ns: u64) -> u64 {
        match self.rate_bps {
            Some(rate) if self.busy_until > now_ns => {
                let ns = u128::from(self.busy_until - now_ns);
                (ns * u128::from(rate)).div_ceil(8_000_000_000) as u64
            }
            _ => 0,
        }
    }

    /// The one-way delay, ns.
    pub fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// Wire size of a packet on this link.
    pub fn wire_size(&self, ip_len: u32, hdr: u32) -> WireSize {
        wire_size(ip_len, hdr, self.mtu)
    }

    /// Draws random loss for one packet.
    pub fn lose(&mut self) -> bool {
        self.loss > 0.0 && self.rng.unit() < self.loss
    }

    /// When a packet whose last bit leaves the bottleneck at `departure_ns`
    /// is handed back: plus delay and jitter, never before the previous release.
    pub fn release_after(&mut self, departure_ns: u64) -> u64 {
        let jitter = if self.jitter_ns > 0 {
            self.rng.upto(self.jitter_ns)
        } else {
            0
        };
        let release_ns = departure_ns
            .saturating_add(self.delay_ns)
            .saturating_add(jitter)
            .max(self.last_release);
        self.last_release = release_ns;
        release_ns
    }

    /// Decides the fate of a packet of `ip_len` IP bytes (headers `hdr`)
    /// arriving at `now_ns`, and books its bottleneck time if it is kept.
    pub fn arrive(&mut self, now_ns: u64, ip_len: u32, hdr: u32) -> (Fate, WireSize) {
        let size = wire_size(ip_len, hdr, self.mtu);
        if self.lose() {
            return (Fate::DropLoss, size);
        }
        let waiting = self.queue_bytes(now_ns);
        let queue_bytes = waiting.saturating_add(size.wire_bytes);
        if let Some(limit) = self.queue_limit {
            if waiting > 0 && queue_bytes > limit {
                return (Fate::DropQueue, size);
            }
        }
        let (departure_ns, wait_ns) = match self.rate_bps {
            Some(rate) => {
                let start = if now_ns > self.busy_until {
                    self.carry = 0;
                    now_ns
                } else {
                    self.busy_until
                };
                let work = u128::from(size.wire_bytes) * 8 * 1_000_000_000 + self.carry;
                let rate = u128::from(rate);
                self.carry = work % rate;
                let tx = u64::try_from(work / rate).unwrap_or(u64::MAX / 4);
                (start.saturating_add(tx), start - now_ns)
            }
            None => (now_ns, 0),
        };
        self.busy_until = departure_ns;
        let release_ns = self.release_after(departure_ns);
        let fate = Fate::Release {
            departure_ns,
            release_ns,
            queue_bytes,
            wait_ns,
        };
        (fate, size)
    }
}

/// How much earlier than scheduled a packet may be released on a link with
/// one-way delay `delay_ns`: 1% of the delay, at most 250 µs.
///
/// Why: every release is a wake-up of the emulator and of the process that
/// receives the packet (an inter-processor interrupt, dear in a VM). At
/// 1 Gbit/s and 50 ms RTT in GSO mode a super-packet is due every ~0.2 ms
/// per direction; releasing, at each wake-up, what falls due within the
/// window cut the emulator's CPU from 14% to 9-11% of a core (bench/lab.sh).
/// The delay's error stays within 1% and no packet leaves before its
/// arrival plus 99% of the delay; without delay nothing is early. NICs
/// coalesce interrupts over similar spans (tens to hundreds of µs).
pub fn release_window_ns(delay_ns: u64) -> u64 {
    (delay_ns / 100).min(RELEASE_WINDOW_MAX_NS)
}

// The emulator's dealings with the kernel beside the queues: epoll, the
// stats file and its writer, the kernel's drop counters, the thread's
// scheduling class and CPU time.
mod os;
use os::{cpu_seconds, Epoll, KernelView, Priority, StatsFile, Writer};

/// One direction at run time: its verdicts, model, held packets, counters
/// (the queues' socket is the loop's: both directions share it).
struct HalfLink {
    verdicts: Verdicts,
    link: Link,
    /// Held packets, in id order with non-decreasing release times:
    /// releasing is popping the front.
    held: VecDeque<Held>,
    /// The link's wire at release: never faster than the rate, also after
    /// a late wake-up (see `wire`).
    wire: Wire,
    stats: DirStats,
    /// Arrival time given to the last packet read, ns since start.
    last_arrival: u64,
    /// The last packet read carried a kernel timestamp.
    stamped: bool,
    /// How early a packet may be released: [`release_window_ns`] of the delay.
    window_ns: u64,
    /// CoDel or FQ-CoDel in front of the bottleneck (None: drop-tail, which
    /// `link` computes at arrival). With one, packets leave in the order the
    /// discipline chooses, so each gets a verdict of its own.
    sched: Option<Scheduler>,
    /// The discipline's outcomes waiting to be applied.
    outs: Vec<aqm::Out>,
    /// Ids among `held` to release with [`ECN_MARK`], in release order.
    marks: VecDeque<u32>,
}

impl HalfLink {
    /// Decides the fate of each packet just read for this direction
    /// (`batch`, emptied); drops are queued as verdicts at once, kept
    /// packets join `held`. `drained`: the read emptied the socket.
    ///
    /// A packet's arrival is its kernel timestamp when it has one (see
    /// [`Clock::arrival`]), else the time of this read.
    fn receive(&mut self, clock: &Clock, batch: &mut Vec<Packet>, drained: bool) {
        let now = clock.now();
        let realtime_offset = clock.realtime_offset();
        for p in batch.drain(..) {
            // A stamp more than STAMP_TRUST old is not believed (a real-time
            // clock step, or a stamp from before the queue): timed now instead.
            let stamped = p
                .stamp
                .and_then(|s| clock.arrival(s, realtime_offset))
                .filter(|&at| now.saturating_sub(at) <= STAMP_TRUST_NS);
            self.stamped = stamped.is_some();
            // Never before the previous arrival (the model reads arrivals in
            // order) nor after now.
            let at = stamped
                .unwrap_or(now)
                .clamp(self.last_arrival.min(now), now);
            self.last_arrival = at;
            if stamped.is_some() {
                let s = &mut self.stats;
                s.stamped += 1;
                s.max_arrival_lag_us = s.max_arrival_lag_us.max((now - at) / 1000);
            }
            let hdr = header_len(p.head()).unwrap_or(DEFAULT_SEGMENT_HEADER);
            if let Some(sched) = &mut self.sched {
                if self.link.lose() {
                    self.verdicts.drop_packet(p.id);
                    self.stats.dropped_loss += 1;
                    continue;
                }
                let size = self.link.wire_size(p.len, hdr);
                let (flow, ect) = aqm::classify(p.head());
                let pkt = aqm::Pkt {
                    id: p.id,
                    wire: size.wire_bytes,
                    ip_len: p.len,
                    segments: size.segments,
                    arrival_ns: at,
                    flow,
                    ect,
                };
                sched.enqueue(at, pkt, &mut self.outs);
                let s = &mut self.stats;
                s.max_queue_bytes = s.max_queue_bytes.max(sched.backlog());
                continue;
            }
            let (fate, size) = self.link.arrive(at, p.len, hdr);
            match fate {
                Fate::DropLoss => {
                    self.verdicts.drop_packet(p.id);
                    self.stats.dropped_loss += 1;
                }
                Fate::DropQueue => {
                    self.verdicts.drop_packet(p.id);
                    self.stats.dropped_queue += 1;
                }
                Fate::Release {
                    release_ns,
                    queue_bytes,
                    wait_ns,
                    ..
                } => {
                    self.held.push_back(Held {
                        id: p.id,
                        at: release_ns,
                        wire: size.wire_bytes,
                    });
                    let s = &mut self.stats;
                    s.packets += 1;
                    s.bytes += u64::from(p.len);
                    s.wire_bytes += size.wire_bytes;
                    s.segments += u64::from(size.segments);
                    s.max_queue_bytes = s.max_queue_bytes.max(queue_bytes);
                    count_wait(s, wait_ns);
                }
            }
        }
        if self.sched.is_some() {
            // Not drained: later arrivals wait in the kernel, so the
            // discipline may only run up to the last one read.
            let until = if drained { now } else { self.last_arrival };
            self.advance(until);
        }
    }

    /// Runs the queue discipline up to `until` (ns since start) and applies
    /// what it decided: drops at once, sent packets join `held` with their
    /// release times (in the order they left the queue).
    fn advance(&mut self, until: u64) {
        let Some(sched) = &mut self.sched else { return };
        sched.advance(until, &mut self.outs);
        let mut outs = std::mem::take(&mut self.outs);
        for o in outs.drain(..) {
            match o {
                aqm::Out::Send {
                    pkt,
                    dequeue_ns,
                    departure_ns,
                    mark,
                } => {
                    let release = self.link.release_after(departure_ns);
                    self.held.push_back(Held {
                        id: pkt.id,
                        at: release,
                        wire: pkt.wire,
                    });
                    let s = &mut self.stats;
                    if mark {
                        self.marks.push_back(pkt.id);
                        s.marked_ecn += 1;
                    }
                    s.packets += 1;
                    s.bytes += u64::from(pkt.ip_len);
                    s.wire_bytes += pkt.wire;
                    s.segments += u64::from(pkt.segments);
                    count_wait(s, dequeue_ns.saturating_sub(pkt.arrival_ns));
                }
                aqm::Out::DropOverflow(pkt) => {
                    self.verdicts.drop_packet(pkt.id);
                    self.stats.dropped_queue += 1;
                }
                aqm::Out::DropAqm(pkt) => {
                    self.verdicts.drop_packet(pkt.id);
                    self.stats.dropped_aqm += 1;
                }
            }
        }
        self.outs = outs;
    }

    /// When the queue discipline next sends a packet, if one waits.
    fn next_dequeue(&self) -> Option<u64> {
        self.sched.as_ref().and_then(Scheduler::next_dequeue)
    }

    /// Whether the loop must wake up for this queue's arrivals. Not while
    /// packets are held and arrivals carry kernel timestamps: a new
    /// packet's release is never before the held ones' (a direction is a
    /// FIFO), so reading it at the next release, with its own arrival time,
    /// changes nothing, and saves a wake-up per packet.
    ///
    /// The same holds behind a queue discipline, although FQ-CoDel may send
    /// a new packet before older ones: its dequeue comes after every
    /// dequeue already made, so its release is after theirs too. What a
    /// discipline needs is every arrival read before it runs, which the
    /// loop does by reading such a queue at every wake-up (see [`run`]).
    fn wants_arrivals(&self, drained: bool) -> bool {
        !drained || self.held.is_empty() || !self.stamped
    }

    /// Releases every held packet that may go (due, and the wire ready for
    /// it): with one batch verdict in a FIFO; one verdict each behind a
    /// queue discipline (a batch verdict accepts every lower id, and
    /// FQ-CoDel releases out of id order).
    ///
    /// Time the wire lost to a late wake-up goes back into the model.
    fn release_due(&mut self, now: u64) {
        let lost_before = self.wire.lost_ns();
        let (held, wire, stats) = (&mut self.held, &mut self.wire, &mut self.stats);
        if self.sched.is_none() {
            if let Some(id) = wire::take_due(held, now, self.window_ns, wire, stats) {
                self.verdicts.accept_upto(id);
            }
        } else {
            while let Some(h) = wire::take_one(held, now, self.window_ns, wire, stats) {
                let mark = (self.marks.front() == Some(&h.id)).then(|| {
                    self.marks.pop_front();
                    ECN_MARK
                });
                self.verdicts.accept_one(h.id, mark);
            }
        }
        let lost = self.wire.lost_ns() - lost_before;
        if lost > 0 {
            self.link.pause(lost);
            if let Some(s) = &mut self.sched {
                s.pause(lost);
            }
        }
    }

    fn refresh_counters(&mut self, verdict_errors: u64) {
        self.stats.verdict_errors = verdict_errors;
    }
}

/// Adds one packet's wait for the bottleneck to the counters.
fn count_wait(s: &mut DirStats, wait_ns: u64) {
    let us = wait_ns / 1000;
    s.queue_delay_sum_us += us;
    s.queue_delay_count += 1;
    s.queue_delay_max_us = s.queue_delay_max_us.max(us);
}

/// Asks the kernel to timestamp every received packet, so that queued
/// packets arrive with `NFQA_TIMESTAMP` (their receive time at the router).
///
/// The switch is global (the kernel's `netstamp_needed` key) and on while
/// any socket on the host has `SO_TIMESTAMPNS` set: this one is held open
/// for the emulator's life. The cost is one clock read per received packet
/// host-wide. Best effort: without it, arrivals are timed when read.
struct ArrivalStamps {
    _socket: Option<OwnedFd>,
}

impl ArrivalStamps {
    fn enable() -> ArrivalStamps {
        // SAFETY: plain syscall; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return ArrivalStamps { _socket: None };
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let on: libc::c_int = 1;
        // SAFETY: `on` outlives the call and the length matches its type.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        ArrivalStamps {
            _socket: (rc == 0).then_some(fd),
        }
    }
}

/// Time for the packet loop: `CLOCK_MONOTONIC` in ns since the emulator
/// started, the clock TCP's departure stamps use.
struct Clock {
    start_ns: u64,
    started: Instant,
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid for the call; both clocks always exist.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

impl Clock {
    fn new() -> Clock {
        Clock {
            start_ns: clock_ns(libc::CLOCK_MONOTONIC),
            started: Instant::now(),
        }
    }

    /// Nanoseconds since start.
    fn now(&self) -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(self.start_ns)
    }

    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` now, ns.
    fn realtime_offset(&self) -> i128 {
        let m = clock_ns(libc::CLOCK_MONOTONIC);
        let r = clock_ns(libc::CLOCK_REALTIME);
        i128::from(r) - i128::from(m)
    }

    /// A kernel timestamp as ns since start; None when it lies before the
    /// start (a stale stamp) or cannot be placed.
    fn arrival(&self, stamp: Stamp, realtime_offset: i128) -> Option<u64> {
        let mono = match stamp {
            Stamp::Monotonic(us) => i128::from(us) * 1000,
            Stamp::Realtime(us) => i128::from(us) * 1000 - realtime_offset,
        };
        u64::try_from(mono - i128::from(self.start_ns)).ok()
    }
}

fn snapshot(dirs: &[HalfLink; 2], clock: &Clock, realtime: bool) -> Stats {
    Stats {
        pid: std::process::id(),
        dirs: [dirs[0].stats.clone(), dirs[1].stats.clone()],
        cpu_s: cpu_seconds(),
        uptime_s: clock.started.elapsed().as_secs_f64(),
        realtime,
    }
}

/// How long the loop may sleep (an arrival wakes it sooner while the
/// queues are watched): until the earliest of the next release, the next
/// counters write (which also bounds how late a stop is noticed), and,
/// while the queues are not watched, their next read (`unwatched_read`, so
/// that their backlog stays small).
fn next_wake(
    dirs: &[HalfLink; 2],
    now: u64,
    next_stats: Instant,
    unwatched_read: Option<u64>,
) -> Duration {
    let mut wake = next_stats
        .saturating_duration_since(Instant::now())
        .min(TICK);
    for dir in dirs {
        if let Some(at) = wire::next_release(&dir.held, &dir.wire, dir.window_ns) {
            wake = wake.min(Duration::from_nanos(at.saturating_sub(now)));
        }
        // The discipline runs on the arrival timeline whenever the loop
        // wakes, so a dequeue need not wake it: only its packet's
        // release must be on time, and that lies at least the one-way
        // delay after the dequeue. Waking then batches the dequeues of
        // a whole delay (at 1 Gbit/s and 5 ms, hundreds) into one wake-up.
        if let Some(at) = dir.next_dequeue() {
            let at = at.saturating_add(dir.link.delay_ns().max(dir.window_ns));
            wake = wake.min(Duration::from_nanos(at.saturating_sub(now)));
        }
    }
    if let Some(next) = unwatched_read {
        wake = wake.min(Duration::from_nanos(next.saturating_sub(now)));
    }
    wake
}

/// Runs until `stop` is set (or a fatal error).
///
/// Binds both queues, then writes the first counters (so a reader that sees
/// the stats file knows the link is up) and loops: wait until the next
/// release, the next counters write or a packet; read all that arrived (drop
/// verdicts at once); release what is due with one batch verdict per
/// direction. On stop, packets still held are not released early: they are
/// counted in `dropped_stop` and the kernel drops them when the queues close.
pub fn run(cfg: &Config, stop: &AtomicBool) -> Result<(), EmulatorError> {
    if cfg.queues[0] == cfg.queues[1] {
        return Err(EmulatorError::SameQueue(cfg.queues[0]));
    }
    let seed = match cfg.seed {
        0 => getrandom::u64().map_err(EmulatorError::Seed)?,
        s => s,
    };
    // Each direction draws from its own generator: reproducible per direction.
    let link = |d: usize| {
        let dir_seed = seed
            .wrapping_add(d as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Link::new(&cfg.shaping[d], cfg.mtu, dir_seed).map_err(|e| EmulatorError::Direction {
            direction: d,
            source: Box::new(e),
        })
    };
    let links = [link(0)?, link(1)?];
    let stats_file = cfg.stats.as_deref().map(StatsFile::new).transpose()?;
    if !cfg.per_packet && cfg.shaping.iter().any(|s| s.loss > 0.0) {
        eprintln!(
            "lab emulate: loss with GSO super-packets drops whole bursts (~45 segments); use per_packet"
        );
    }
    if let Some(cpu) = cfg.cpu {
        // Before any thread starts: the counters writer inherits it.
        crate::measure::placement::pin_current_thread(&[cpu])?;
    }
    // Timers fire within 1 ns of their time instead of the default 50 µs slack.
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };

    let clock = Clock::new();
    let _stamps = ArrivalStamps::enable();
    let mut epoll = Epoll::new()?;
    let mut socket = Socket::open(&cfg.queues, !cfg.per_packet)?;
    epoll.add(socket.as_raw_fd())?;
    let open = |d: usize, link: Link| -> Result<HalfLink, EmulatorError> {
        Ok(HalfLink {
            verdicts: Verdicts::new(cfg.queues[d]),
            link,
            held: VecDeque::new(),
            wire: Wire::new(cfg.shaping[d].rate_bps),
            stats: DirStats::default(),
            last_arrival: 0,
            stamped: false,
            window_ns: release_window_ns(cfg.shaping[d].delay_us.saturating_mul(1000)),
            sched: Scheduler::new(
                &cfg.shaping[d].aqm,
                cfg.shaping[d].rate_bps,
                cfg.shaping[d].queue_limit_bytes,
                cfg.mtu,
            ),
            outs: Vec::new(),
            marks: VecDeque::new(),
        })
    };
    let [l0, l1] = links;
    let mut dirs = [open(0, l0)?, open(1, l1)?];

    let writer = match stats_file {
        Some(file) => {
            let kernel = KernelView {
                queues: cfg.queues,
                last: Default::default(),
            };
            Some(Writer::start(file, kernel, snapshot(&dirs, &clock, false))?)
        }
        None => None,
    };
    // After the writer thread started, so that it stays SCHED_OTHER.
    let mut priority = Priority::new();
    let mut next_stats = Instant::now() + TICK;
    let mut batches = [Vec::with_capacity(1024), Vec::with_capacity(1024)];
    // An arrival wakes the loop (the socket is in the epoll set for
    // reading) while either direction wants arrivals; else the socket is
    // read every UNWATCHED_READ_NS, each packet with its own timestamp as
    // its arrival.
    let mut watched = true;
    let mut last_read = 0u64;
    let mut ready = true;
    let mut drained = true;
    let disciplined = dirs.iter().any(|d| d.sched.is_some());
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        let due = !watched && now.saturating_sub(last_read) >= UNWATCHED_READ_NS;
        // A queue discipline is about to run up to now: it must know every
        // packet that arrived by then.
        if ready || due || disciplined {
            drained = socket.recv(&mut batches, RECV_ROUNDS)?;
            last_read = now;
            for (dir, batch) in dirs.iter_mut().zip(batches.iter_mut()) {
                dir.receive(&clock, batch, drained);
            }
        }
        let now = clock.now();
        for dir in dirs.iter_mut() {
            dir.advance(now);
            dir.release_due(now);
        }
        let [d0, d1] = &mut dirs;
        socket.flush(&mut [&mut d0.verdicts, &mut d1.verdicts])?;
        let want = dirs.iter().any(|d| d.wants_arrivals(drained));
        if want != watched {
            epoll.watch(socket.as_raw_fd(), want)?;
            watched = want;
        }
        if Instant::now() >= next_stats {
            next_stats = (next_stats + TICK).max(Instant::now());
            priority.adjust();
            if let Some(w) = &writer {
                for (d, dir) in dirs.iter_mut().enumerate() {
                    dir.refresh_counters(socket.verdict_errors(d));
                }
                w.offer(snapshot(&dirs, &clock, priority.realtime));
            }
        }
        // Sleep until the next moment something is due, or an arrival
        // while the socket is watched.
        let unwatched_read = (!watched).then(|| last_read.saturating_add(UNWATCHED_READ_NS));
        let wake = next_wake(&dirs, clock.now(), next_stats, unwatched_read);
        ready = epoll.wait(wake)?;
    }

    for (d, dir) in dirs.iter_mut().enumerate() {
        dir.refresh_counters(socket.verdict_errors(d));
        let queued = dir.sched.as_mut().map_or(0, |s| s.drain_all().len());
        dir.stats.dropped_stop = (dir.held.len() + queued) as u64;
        dir.held.clear();
    }
    let last = snapshot(&dirs, &clock, priority.realtime);
    // Closing the socket destroys the queues: the kernel drops what they held.
    drop(socket);
    match writer {
        Some(w) => w.finish(last),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
