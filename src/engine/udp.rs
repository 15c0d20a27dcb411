//! UDP for the engine: linerate's datagram header, sockets, batched sends
//! and receives (sendmmsg/recvmmsg, UDP_SEGMENT), the kernel's receive-drop
//! counter (SO_RXQ_OVFL), and the setup that pairs each client flow with a
//! socket of its own on the agent before the window opens.
//!
//! Flows: one connected socket per flow on both ends. The agent listens on
//! one port per data address; a client flow's hello arrives there, and the
//! agent answers from a new socket bound to the same address and port
//! (SO_REUSEPORT) and connected to the client: Linux delivers a datagram to
//! the connected socket that matches its four-tuple before any unconnected
//! one, so from then on each flow has its own socket, its own receive
//! buffer and its own drop counter (receiver drops are per flow, and the
//! agent never looks an address up per datagram). The cost is a socket per
//! flow (10,000 flows: 10,000 descriptors on each end, as with TCP).
//! Measured against one shared socket that finds the flow in the header
//! (bench/udp_demux.sh, RESULTS.md): as fast at 1 flow, 4-7% faster and
//! with less receiver CPU per packet at 100 and 1,000 flows.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::sockopt::set_int;
use super::EngineError;
use crate::model::sample::KernelUdp;
use crate::model::spec::{TestSpec, UDP_HEADER};

const MAGIC: u16 = 0x4c55; // "LU"
const VERSION: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Data = 0,
    Hello = 1,
    Ack = 2,
    Request = 3,
    Response = 4,
}

impl Kind {
    fn from(b: u8) -> Option<Kind> {
        Some(match b {
            0 => Kind::Data,
            1 => Kind::Hello,
            2 => Kind::Ack,
            3 => Kind::Request,
            4 => Kind::Response,
            _ => return None,
        })
    }
}

/// Every datagram's first 32 bytes (big-endian): magic (2), version (1),
/// kind (1), flow (4), cookie (8), sequence number (8), the sender's
/// CLOCK_MONOTONIC when it was sent (8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flow: u32,
    pub cookie: u64,
    pub seq: u64,
    pub sent_ns: u64,
}

impl Header {
    pub fn write(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        b[2] = VERSION;
        b[3] = self.kind as u8;
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        b[16..24].copy_from_slice(&self.seq.to_be_bytes());
        b[24..32].copy_from_slice(&self.sent_ns.to_be_bytes());
    }

    /// Just the sequence number and send time (the rest of a sender's
    /// header does not change between datagrams).
    #[inline]
    pub fn restamp(b: &mut [u8], seq: u64, sent_ns: u64) {
        b[16..24].copy_from_slice(&seq.to_be_bytes());
        b[24..32].copy_from_slice(&sent_ns.to_be_bytes());
    }

    /// A header of this test (`cookie`), or None for anything else.
    pub fn read(b: &[u8], cookie: u64) -> Option<Header> {
        if b.len() < UDP_HEADER || u16::from_be_bytes([b[0], b[1]]) != MAGIC || b[2] != VERSION {
            return None;
        }
        let h = Header {
            kind: Kind::from(b[3])?,
            flow: u32::from_be_bytes(b[4..8].try_into().unwrap()),
            cookie: u64::from_be_bytes(b[8..16].try_into().unwrap()),
            seq: u64::from_be_bytes(b[16..24].try_into().unwrap()),
            sent_ns: u64::from_be_bytes(b[24..32].try_into().unwrap()),
        };
        (h.cookie == cookie).then_some(h)
    }
}

/// Send stamps and latencies use this host's CLOCK_MONOTONIC.
pub use crate::measure::interval::mono_ns;

/// A UDP socket with the spec's buffers, the receive-drop counter on, and
/// SO_REUSEPORT when it shares an agent's port.
pub fn socket(family: &SocketAddr, spec: &TestSpec, reuseport: bool) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*family),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    if reuseport {
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
    }
    if let Some(b) = spec.sndbuf {
        s.set_send_buffer_size(b)?;
    }
    if let Some(b) = spec.rcvbuf {
        s.set_recv_buffer_size(b)?;
    }
    set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    if spec.gro {
        set_int(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1)
            .map_err(|e| io::Error::new(e.kind(), format!("UDP_GRO: {e} (--gro)")))?;
    }
    if spec.spin {
        let _ = set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_BUSY_POLL, 50);
    }
    Ok(s)
}

/// Datagrams to send in one sendmmsg: slots of one size in one buffer.
pub struct SendBatch {
    pub buf: Vec<u8>,
    pub slot: usize,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in iov/msgs are rebuilt before every use and
// only ever point into `buf`, which moves with the batch.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// `n` slots of `slot` bytes, the payload after the header taken from
    /// `payload` (repeated as needed), each slot headed by `head`.
    pub fn new(n: usize, slot: usize, payload: &[u8], head: Header) -> SendBatch {
        let mut buf = vec![0u8; n * slot];
        for s in buf.chunks_mut(slot) {
            for (i, b) in s.iter_mut().enumerate().skip(UDP_HEADER) {
                *b = payload.get(i % payload.len().max(1)).copied().unwrap_or(0);
            }
            head.write(s);
        }
        SendBatch {
            buf,
            slot,
            iov: Vec::with_capacity(n),
            msgs: Vec::with_capacity(n),
        }
    }

    pub fn slots(&self) -> usize {
        self.buf.len() / self.slot
    }

    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.buf[i * self.slot..(i + 1) * self.slot]
    }

    /// Sends slots 0..n (each `len[i]` bytes, or the whole slot) on a
    /// connected socket; returns how many went (0 when it would block).
    pub fn send(&mut self, fd: i32, n: usize, lens: Option<&[usize]>) -> io::Result<usize> {
        self.iov.clear();
        self.msgs.clear();
        for i in 0..n {
            let len = lens.map_or(self.slot, |l| l[i]);
            self.iov.push(libc::iovec {
                iov_base: self.buf[i * self.slot..].as_mut_ptr() as *mut libc::c_void,
                iov_len: len,
            });
        }
        for i in 0..n {
            // SAFETY: a zeroed msghdr is a valid empty one.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            self.msgs.push(libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            });
        }
        // SAFETY: n mmsghdrs, each pointing at one iovec into self.buf.
        let rc = unsafe { libc::sendmmsg(fd, self.msgs.as_mut_ptr(), n as u32, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(rc as usize)
    }

    /// Sends slots 0..n as one datagram the kernel splits every `slot`
    /// bytes (UDP_SEGMENT); returns how many datagrams went.
    pub fn send_gso(&mut self, fd: i32, n: usize) -> io::Result<usize> {
        let mut iov = libc::iovec {
            iov_base: self.buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: n * self.slot,
        };
        // SAFETY: CMSG_SPACE of a u16 is a constant.
        let space = unsafe { libc::CMSG_SPACE(2) } as usize;
        let mut control = [0u64; 4];
        // SAFETY: a zeroed msghdr, then one control message of our own.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        h.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = space;
        // SAFETY: the control buffer holds CMSG_SPACE(2) bytes.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, self.slot as u16);
        }
        // SAFETY: a valid msghdr over our buffer.
        let rc = unsafe { libc::sendmsg(fd, &h, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(n)
    }
}

/// Buffers for one recvmmsg: datagrams, their lengths, and the socket's
/// cumulative drop count (SO_RXQ_OVFL) as the last datagram carried it.
pub struct RecvBatch {
    pub buf: Vec<u8>,
    pub slot: usize,
    pub lens: Vec<usize>,
    /// With UDP_GRO: the size of the datagrams the kernel coalesced into
    /// message i (0: one datagram).
    pub segs: Vec<usize>,
    /// The kernel's count of datagrams this socket dropped (buffer full).
    pub drops: Option<u32>,
    /// When message i reached the socket (SO_TIMESTAMPNS, CLOCK_REALTIME
    /// ns), where the socket asks for stamps.
    pub stamps: Vec<Option<u64>>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    control: Vec<u64>,
}

// SAFETY: as SendBatch: pointers rebuilt before every use, into owned buffers.
unsafe impl Send for RecvBatch {}

/// Room for SO_RXQ_OVFL and UDP_GRO (two CMSG_SPACE(4) = 2 x 24 bytes)
/// and SCM_TIMESTAMPNS (CMSG_SPACE(16) = 32 bytes).
const CONTROL_WORDS: usize = 12;

impl RecvBatch {
    pub fn new(n: usize, slot: usize) -> RecvBatch {
        RecvBatch {
            buf: vec![0u8; n * slot],
            slot,
            lens: vec![0; n],
            segs: vec![0; n],
            drops: None,
            stamps: vec![None; n],
            iov: Vec::with_capacity(n),
            msgs: Vec::with_capacity(n),
            control: vec![0u64; n * CONTROL_WORDS],
        }
    }

    pub fn datagram(&self, i: usize) -> &[u8] {
        &self.buf[i * self.slot..i * self.slot + self.lens[i]]
    }

    /// The datagrams in message i: one, or with UDP_GRO the coalesced ones.
    pub fn datagrams(&self, i: usize) -> std::slice::Chunks<'_, u8> {
        let d = self.datagram(i);
        let seg = if self.segs[i] > 0 {
            self.segs[i]
        } else {
            d.len().max(1)
        };
        d.chunks(seg)
    }

    /// Receives what is queued, up to the batch; 0 when nothing is.
    pub fn recv(&mut self, fd: i32) -> io::Result<usize> {
        let n = self.lens.len();
        self.iov.clear();
        self.msgs.clear();
        for i in 0..n {
            self.iov.push(libc::iovec {
                iov_base: self.buf[i * self.slot..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.slot,
            });
        }
        for i in 0..n {
            // SAFETY: a zeroed msghdr is a valid empty one.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            h.msg_control = self.control[i * CONTROL_WORDS..].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = CONTROL_WORDS * 8;
            self.msgs.push(libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            });
        }
        // SAFETY: n mmsghdrs over our buffers; MSG_DONTWAIT: never blocks.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(0),
                _ => Err(e),
            };
        }
        let got = rc as usize;
        for i in 0..got {
            self.lens[i] = self.msgs[i].msg_len as usize;
            self.segs[i] = 0;
            let h = &self.msgs[i].msg_hdr;
            self.stamps[i] = crate::measure::rxstamp::stamp_ns(h);
            // SAFETY: walking the control messages the kernel wrote.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                        self.drops =
                            Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32));
                    } else if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                        let seg =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
                        self.segs[i] = seg.max(0) as usize;
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
        }
        Ok(got)
    }
}

/// The agent's UDP listeners: one per data address, on `port` (0: a free one).
pub fn listeners(
    addrs: &[IpAddr],
    port: u16,
    spec: &TestSpec,
) -> Result<Vec<UdpSocket>, EngineError> {
    addrs
        .iter()
        .map(|ip| {
            let at = SocketAddr::new(*ip, port);
            let s =
                socket(&at, spec, true).map_err(|source| EngineError::UdpSocket { at, source })?;
            s.bind(&at.into())
                .map_err(|source| EngineError::UdpListener { at, source })?;
            Ok(s.into())
        })
        .collect()
}

/// How long the agent keeps answering hellos after the last flow arrived,
/// for clients whose acknowledgement was lost (they resend every 50 ms).
const LINGER: Duration = Duration::from_millis(250);
const RESEND: Duration = Duration::from_millis(50);

fn datagram(kind: Kind, flow: u32, cookie: u64) -> [u8; UDP_HEADER] {
    let mut b = [0u8; UDP_HEADER];
    Header {
        kind,
        flow,
        cookie,
        seq: 0,
        sent_ns: mono_ns(),
    }
    .write(&mut b);
    b
}

/// The agent's half of the setup: waits for a hello from every flow of
/// `expect` on `listeners`, gives each flow a socket of its own connected
/// to the client (same address and port), acknowledges it, and keeps
/// answering repeated hellos until none came for a while. Datagrams that
/// are not this test's are ignored (and counted as rejected).
pub fn accept_flows(
    listeners: &[UdpSocket],
    spec: &TestSpec,
    cookie: u64,
    expect: &BTreeSet<u32>,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<(Vec<(u32, UdpSocket)>, u32), EngineError> {
    let deadline = Instant::now() + timeout;
    let mut flows: BTreeMap<u32, UdpSocket> = BTreeMap::new();
    let mut rejected = 0u32;
    let mut buf = [0u8; 2048];
    let mut last_hello = Instant::now();
    loop {
        let mut busy = false;
        for l in listeners {
            loop {
                let (n, from) = match l.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // An ICMP error from an earlier datagram: not fatal here.
                    Err(_) => continue,
                };
                busy = true;
                let Some(h) = Header::read(&buf[..n], cookie).filter(|h| h.kind == Kind::Hello)
                else {
                    rejected += 1;
                    continue;
                };
                last_hello = Instant::now();
                if !expect.contains(&h.flow) {
                    rejected += 1;
                    continue;
                }
                if let Some(s) = flows.get(&h.flow) {
                    // Its socket exists: a hello that raced the connect.
                    let _ = s.send(&datagram(Kind::Ack, h.flow, cookie));
                    continue;
                }
                let local = l.local_addr().map_err(EngineError::LocalAddr)?;
                let s = socket(&local, spec, true)
                    .and_then(|s| {
                        s.bind(&local.into())?;
                        s.connect(&from.into())?;
                        Ok(s)
                    })
                    .map_err(|source| EngineError::UdpFlowFrom {
                        id: h.flow,
                        from,
                        source,
                    })?;
                let s: UdpSocket = s.into();
                let _ = s.send(&datagram(Kind::Ack, h.flow, cookie));
                flows.insert(h.flow, s);
            }
        }
        // Hellos resent because an ack was lost come to the flow's socket.
        for (&id, s) in &flows {
            while let Ok(n) = s.recv(&mut buf) {
                busy = true;
                if Header::read(&buf[..n], cookie).is_some_and(|h| h.kind == Kind::Hello) {
                    last_hello = Instant::now();
                    let _ = s.send(&datagram(Kind::Ack, id, cookie));
                }
            }
        }
        let all = flows.len() == expect.len();
        if all && last_hello.elapsed() >= LINGER {
            break;
        }
        if cancel.load(Ordering::Relaxed) {
            return Err(EngineError::UdpCancelled);
        }
        if !all && Instant::now() >= deadline {
            return Err(EngineError::UdpHelloTimeout {
                arrived: flows.len(),
                n: expect.len(),
                timeout,
            });
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    Ok((flows.into_iter().collect(), rejected))
}

/// UDP flows to a server that says no hello (another tool's QUIC perf
/// server): each flow's socket, with the test's options, connected to its
/// target.
pub fn connect_plain(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
) -> Result<Vec<(u32, UdpSocket)>, EngineError> {
    targets
        .iter()
        .map(|&(id, to)| {
            let s = socket(&to, spec, false)
                .and_then(|s| {
                    s.connect(&to.into())?;
                    Ok(s)
                })
                .map_err(|source| EngineError::UdpFlowTo { id, to, source })?;
            Ok((id, s.into()))
        })
        .collect()
}

/// The client's half: a socket per flow connected to its target, a hello
/// sent every 50 ms until the agent acknowledges it.
pub fn connect_flows(
    targets: &[(u32, SocketAddr)],
    spec: &TestSpec,
    cookie: u64,
    timeout: Duration,
) -> Result<Vec<(u32, UdpSocket)>, EngineError> {
    let mut pending: BTreeMap<u32, (UdpSocket, Instant)> = BTreeMap::new();
    let mut done = Vec::with_capacity(targets.len());
    for &(id, to) in targets {
        let s = socket(&to, spec, false)
            .and_then(|s| {
                s.connect(&to.into())?;
                Ok(s)
            })
            .map_err(|source| EngineError::UdpFlowTo { id, to, source })?;
        let s: UdpSocket = s.into();
        let _ = s.send(&datagram(Kind::Hello, id, cookie));
        pending.insert(id, (s, Instant::now()));
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 2048];
    while !pending.is_empty() {
        let mut acked = Vec::new();
        let mut busy = false;
        for (&id, (s, sent)) in pending.iter_mut() {
            loop {
                match s.recv(&mut buf) {
                    Ok(n) => {
                        busy = true;
                        if Header::read(&buf[..n], cookie)
                            .is_some_and(|h| h.kind == Kind::Ack && h.flow == id)
                        {
                            acked.push(id);
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // ICMP port unreachable: the agent is not there (yet).
                    Err(_) => break,
                }
            }
            if sent.elapsed() >= RESEND {
                let _ = s.send(&datagram(Kind::Hello, id, cookie));
                *sent = Instant::now();
            }
        }
        for id in acked {
            if let Some((s, _)) = pending.remove(&id) {
                done.push((id, s));
            }
        }
        if Instant::now() >= deadline {
            let to: BTreeSet<String> = targets.iter().map(|(_, a)| a.to_string()).collect();
            return Err(EngineError::UdpAnswerTimeout {
                answered: done.len(),
                n: targets.len(),
                to: to.into_iter().collect::<Vec<_>>().join(", "),
                timeout,
            });
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    done.sort_by_key(|(id, _)| *id);
    Ok(done)
}

/// Kernel counters of UDP (host-wide, this network namespace), from
/// /proc/net/snmp and snmp6: datagrams delivered, and dropped for a full
/// receive buffer.
pub fn kernel_udp() -> KernelUdp {
    let mut k = KernelUdp::default();
    if let Ok(text) = std::fs::read_to_string("/proc/net/snmp") {
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp:")).collect();
        if lines.len() >= 2 {
            let names: Vec<&str> = lines[0].split_whitespace().collect();
            let vals: Vec<&str> = lines[1].split_whitespace().collect();
            for (n, v) in names.iter().zip(&vals) {
                let v: u64 = v.parse().unwrap_or(0);
                match *n {
                    "InDatagrams" => k.in_datagrams += v,
                    "RcvbufErrors" => k.rcvbuf_errors += v,
                    "InErrors" => k.in_errors += v,
                    _ => {}
                }
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string("/proc/net/snmp6") {
        for l in text.lines() {
            let mut it = l.split_whitespace();
            if let (Some(n), Some(v)) = (it.next(), it.next()) {
                let v: u64 = v.parse().unwrap_or(0);
                match n {
                    "Udp6InDatagrams" => k.in_datagrams += v,
                    "Udp6RcvbufErrors" => k.rcvbuf_errors += v,
                    "Udp6InErrors" => k.in_errors += v,
                    _ => {}
                }
            }
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiving socket with `spec`'s options on loopback, and a sender
    /// connected to it.
    pub(super) fn pair(spec: &TestSpec) -> (UdpSocket, UdpSocket) {
        let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let s = socket(&a, spec, false).unwrap();
        s.bind(&a.into()).unwrap();
        let rx: UdpSocket = s.into();
        let to = rx.local_addr().unwrap();
        let s = socket(&to, &TestSpec::default(), false).unwrap();
        s.connect(&to.into()).unwrap();
        (rx, s.into())
    }

    #[test]
    fn headers_roundtrip_and_refuse_others() {
        let h = Header {
            kind: Kind::Request,
            flow: 7,
            cookie: 0xdead_beef,
            seq: 1 << 40,
            sent_ns: 123_456_789,
        };
        let mut b = [0u8; 64];
        h.write(&mut b);
        assert_eq!(Header::read(&b, 0xdead_beef), Some(h));
        assert_eq!(Header::read(&b, 1), None, "another test's cookie");
        assert_eq!(Header::read(&b[..31], 0xdead_beef), None);
        Header::restamp(&mut b, 9, 10);
        let r = Header::read(&b, 0xdead_beef).unwrap();
        assert_eq!((r.seq, r.sent_ns, r.flow), (9, 10, 7));
        b[3] = 99;
        assert_eq!(Header::read(&b, 0xdead_beef), None);
    }

    #[test]
    fn batches_cross_loopback_with_drop_counts() {
        let spec = TestSpec {
            rcvbuf: Some(4096),
            ..Default::default()
        };
        let (rx, tx) = pair(&spec);
        let head = Header {
            kind: Kind::Data,
            flow: 1,
            cookie: 5,
            seq: 0,
            sent_ns: 0,
        };
        let mut sb = SendBatch::new(32, 64, b"xyz", head);
        let mut sent = 0;
        for round in 0..20u64 {
            for i in 0..32 {
                Header::restamp(sb.slot_mut(i), round * 32 + i as u64, 1);
            }
            sent += sb.send(tx.as_raw_fd(), 32, None).unwrap();
        }
        assert!(sent > 0);
        let mut rb = RecvBatch::new(16, 2048);
        let drain = |rb: &mut RecvBatch| {
            let mut got = 0;
            loop {
                let n = rb.recv(rx.as_raw_fd()).unwrap();
                if n == 0 {
                    return got;
                }
                for i in 0..n {
                    let d = rb.datagram(i);
                    assert_eq!(d.len(), 64);
                    assert_eq!(Header::read(d, 5).unwrap().flow, 1);
                    assert_eq!(d[UDP_HEADER], b"xyz"[UDP_HEADER % 3]);
                }
                got += n;
            }
        };
        let mut got = drain(&mut rb);
        // The kernel stamps its drop count on datagrams queued after the
        // drops: send a few more once the buffer has room again.
        sent += sb.send(tx.as_raw_fd(), 4, None).unwrap();
        got += drain(&mut rb);
        // A 4 KiB buffer cannot hold 640 datagrams: the kernel counted drops.
        let drops = rb.drops.expect("SO_RXQ_OVFL reported") as usize;
        assert!(drops > 0, "no drops counted");
        assert_eq!(
            got + drops,
            sent,
            "received {got} + dropped {drops} of {sent}"
        );
    }
}

#[cfg(test)]
mod gro_tests {
    use super::*;

    #[test]
    fn gso_batches_arrive_coalesced_with_their_segment_size() {
        let spec = TestSpec {
            gro: true,
            ..Default::default()
        };
        let (rx, tx) = super::tests::pair(&spec);
        let head = Header {
            kind: Kind::Data,
            flow: 3,
            cookie: 9,
            seq: 0,
            sent_ns: 0,
        };
        let mut sb = SendBatch::new(16, 64, b"p", head);
        for i in 0..16 {
            Header::restamp(sb.slot_mut(i), i as u64, 1);
        }
        assert_eq!(sb.send_gso(tx.as_raw_fd(), 16).unwrap(), 16);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut rb = RecvBatch::new(4, 65_536);
        let n = rb.recv(rx.as_raw_fd()).unwrap();
        let seqs: Vec<u64> = (0..n)
            .flat_map(|i| rb.datagrams(i).collect::<Vec<_>>())
            .map(|d| Header::read(d, 9).unwrap().seq)
            .collect();
        assert_eq!(
            seqs,
            (0..16).collect::<Vec<u64>>(),
            "lens {:?} segs {:?}",
            &rb.lens[..n],
            &rb.segs[..n]
        );
    }
}
