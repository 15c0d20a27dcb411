//! A minimal NFQUEUE client over raw netlink (`libc` only, no libnetfilter_queue).
//!
//! The emulator needs four things from the kernel and nothing else: bind a
//! queue, receive the first bytes of each queued packet with its id and
//! length, drop one packet by id, and release every packet up to an id in a
//! single message (`NFQNL_MSG_VERDICT_BATCH`). A link's two queues (one per
//! direction) share one netlink [`Socket`]; a batch verdict names its queue
//! and the kernel applies it to that queue alone, so it releases exactly one
//! direction of the link. Each direction gathers its verdicts in its own
//! [`Verdicts`].
//!
//! Fail-closed by construction: `NFQA_CFG_F_FAIL_OPEN` is explicitly cleared
//! and the iptables rule must not use `--queue-bypass`. When the socket is
//! closed (the process exits or dies), the kernel destroys the queue
//! instance and drops every packet still held; later packets find no
//! listener and are dropped too.

use std::io;

use super::error::{EmulatorError, OsText};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Bytes of each packet copied to user space: the IPv4 header and the start
/// of the TCP/UDP header, enough to size segments; the payload stays in the kernel.
pub const COPY_RANGE: usize = 64;
/// Kernel limit on packets held per queue; beyond it the kernel drops (fail-closed).
pub const QUEUE_MAXLEN: u32 = 262_144;
/// Receive buffer: packet notifications must never be lost for lack of room
/// (a lost notification is a dropped packet).
pub const RCVBUF_BYTES: libc::c_int = 64 << 20;

const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
const NLA_HDRLEN: usize = 4;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;

const SUBSYS_QUEUE: u16 = (libc::NFNL_SUBSYS_QUEUE as u16) << 8;
const MSG_PACKET: u16 = SUBSYS_QUEUE | libc::NFQNL_MSG_PACKET as u16;
const MSG_VERDICT: u16 = SUBSYS_QUEUE | libc::NFQNL_MSG_VERDICT as u16;
const MSG_CONFIG: u16 = SUBSYS_QUEUE | libc::NFQNL_MSG_CONFIG as u16;
const MSG_VERDICT_BATCH: u16 = SUBSYS_QUEUE | libc::NFQNL_MSG_VERDICT_BATCH as u16;

const NFQA_PACKET_HDR: u16 = libc::NFQA_PACKET_HDR as u16;
const NFQA_VERDICT_HDR: u16 = libc::NFQA_VERDICT_HDR as u16;
const NFQA_PAYLOAD: u16 = libc::NFQA_PAYLOAD as u16;
const NFQA_CAP_LEN: u16 = libc::NFQA_CAP_LEN as u16;
const NFQA_SKB_INFO: u16 = libc::NFQA_SKB_INFO as u16;
const NFQA_TIMESTAMP: u16 = libc::NFQA_TIMESTAMP as u16;
const NFQA_MARK: u16 = libc::NFQA_MARK as u16;
/// `NFQA_SKB_GSO` in `NFQA_SKB_INFO` (linux/netfilter/nfnetlink_queue.h).
const NFQA_SKB_GSO: u32 = 1 << 1;

const NFQA_CFG_CMD: u16 = libc::NFQA_CFG_CMD as u16;
const NFQA_CFG_PARAMS: u16 = libc::NFQA_CFG_PARAMS as u16;
const NFQA_CFG_QUEUE_MAXLEN: u16 = libc::NFQA_CFG_QUEUE_MAXLEN as u16;
const NFQA_CFG_MASK: u16 = libc::NFQA_CFG_MASK as u16;
const NFQA_CFG_FLAGS: u16 = libc::NFQA_CFG_FLAGS as u16;

/// Verdict messages are all this long (header, nfgenmsg, one 8-byte attribute).
const VERDICT_MSG_LEN: usize = NLMSG_HDRLEN + NFGENMSG_LEN + NLA_HDRLEN + 8;
/// Verdicts per `send`: far below the default netlink send buffer (~208 KiB).
const VERDICTS_PER_SEND: usize = 1024;
/// Datagrams per `recvmmsg` and the room for each (a 64-byte copy makes
/// messages of about 150 bytes; a truncated one is counted, never misread).
const RECV_SLOTS: usize = 64;
const RECV_SLOT_BYTES: usize = 4096;
/// How long `open` waits for the kernel's answer to the bind request.
const ACK_TIMEOUT_MS: libc::c_int = 2000;

/// One queued packet as the kernel announced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The queue it waits in.
    pub queue: u16,
    /// Kernel id, increasing per queue in arrival order (wraps at 2^32).
    pub id: u32,
    /// Length of the whole packet at the IP layer, bytes (a GSO super-packet
    /// counts whole): `NFQA_CAP_LEN` when the copy was truncated, else the
    /// length of the copy.
    pub len: u32,
    /// The kernel flagged it as a GSO super-packet (`NFQA_SKB_INFO`).
    pub gso: bool,
    /// The packet's kernel timestamp (`NFQA_TIMESTAMP`), microseconds, when
    /// it had one: see [`Stamp`].
    pub stamp: Option<Stamp>,
    head: [u8; COPY_RANGE],
    head_len: u8,
}

impl Packet {
    /// The first bytes of the packet (IP header onwards), at most [`COPY_RANGE`].
    pub fn head(&self) -> &[u8] {
        &self.head[..self.head_len as usize]
    }
}

/// A packet's kernel timestamp as NFQUEUE reports it: `skb->tstamp` in
/// whole microseconds, on one of two clocks the message does not name.
///
/// Forwarded packets carry a `CLOCK_REALTIME` receive stamp when some
/// socket on the host asked for timestamps (the emulator holds one), else
/// none: on this kernel forwarded TCP arrived unstamped until then. A
/// packet that kept its sender's departure time (TCP's EDT stamp is on
/// `CLOCK_MONOTONIC`) would be told apart by size: a monotonic clock (time
/// since boot) stays below 10^9 s, a real-time one (since 1970) is above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// `CLOCK_MONOTONIC`, microseconds.
    Monotonic(u64),
    /// `CLOCK_REALTIME`, microseconds.
    Realtime(u64),
}

impl Stamp {
    /// Seconds above which a stamp is taken as real time (2001-09-09).
    const REALTIME_SECONDS: u64 = 1_000_000_000;

    fn from_parts(sec: u64, usec: u64) -> Option<Stamp> {
        if usec >= 1_000_000 || sec == 0 && usec == 0 {
            return None;
        }
        let us = sec.checked_mul(1_000_000)?.checked_add(usec)?;
        Some(if sec >= Self::REALTIME_SECONDS {
            Stamp::Realtime(us)
        } else {
            Stamp::Monotonic(us)
        })
    }
}

/// The kernel's per-queue counters (`/proc/net/netfilter/nfnetlink_queue`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounters {
    /// Packets currently held by the kernel for this queue.
    pub held: u64,
    /// Dropped because the queue held `QUEUE_MAXLEN` packets.
    pub queue_dropped: u64,
    /// Dropped because the notification did not fit the socket buffer.
    pub user_dropped: u64,
}

/// What one netlink message from the kernel says.
#[derive(Debug, PartialEq, Eq)]
enum Message {
    Packet(Packet),
    /// `NLMSG_ERROR`: errno 0 is an ACK; others are failures (positive
    /// errno), which echo the request and so name its queue.
    Ack {
        seq: u32,
        errno: i32,
        queue: Option<u16>,
    },
}

/// One netlink socket bound to every queue of one link (both directions).
///
/// One socket for both, not one each, because each wake-up of the emulator
/// then costs one `recvmmsg` and one `send` instead of two of each, and the
/// two directions' released packets reach the receiving CPU's backlog in
/// one system call: the first raises the inter-processor interrupt that
/// wakes it (a VM exit here), the second finds it raised. Each message
/// names its queue, so a batch verdict still releases one direction only.
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
    /// The queues bound, in the order given to [`Socket::open`].
    nums: Vec<u16>,
    seq: u32,
    /// The verdicts of one flush, gathered into one buffer.
    out: Vec<u8>,
    /// Receive slots for `recvmmsg`.
    slots: Vec<u8>,
    /// Packets that arrived while `open` waited for a bind ACK.
    early: Vec<Packet>,
    /// Errors the kernel reported for our verdicts (e.g. ENOENT: unknown
    /// id), per queue.
    verdict_errors: Vec<u64>,
    /// Datagrams that did not fit a receive slot (ignored).
    pub truncated: u64,
}

/// The verdicts one direction decided since the last flush, as netlink
/// messages for its queue; [`Socket::flush`] sends them.
#[derive(Debug)]
pub struct Verdicts {
    num: u16,
    seq: u32,
    out: Vec<u8>,
}

/// Appends an `nlmsghdr` + `nfgenmsg` for queue `num`; the length is patched by `finish_msg`.
fn start_msg(buf: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, num: u16) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.push(libc::AF_UNSPEC as u8);
    buf.push(libc::NFNETLINK_V0 as u8);
    buf.extend_from_slice(&num.to_be_bytes());
    at
}

fn put_attr(buf: &mut Vec<u8>, kind: u16, data: &[u8]) {
    let len = (NLA_HDRLEN + data.len()) as u16;
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(data);
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

fn finish_msg(buf: &mut [u8], at: usize) {
    let len = (buf.len() - at) as u32;
    buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
}

/// The one configuration message: bind, copy mode, queue length, flags.
/// The kernel applies it under one lock, so no packet can be queued between
/// the bind and the copy mode (with copy mode NONE it would be dropped).
fn config_msg(num: u16, seq: u32, gso: bool) -> Vec<u8> {
    let mut buf = Vec::with_capacity(96);
    let at = start_msg(&mut buf, MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, num);
    // struct nfqnl_msg_config_cmd { u8 command; u8 pad; be16 pf; }
    let pf = (libc::AF_INET as u16).to_be_bytes();
    put_attr(
        &mut buf,
        NFQA_CFG_CMD,
        &[libc::NFQNL_CFG_CMD_BIND as u8, 0, pf[0], pf[1]],
    );
    // struct nfqnl_msg_config_params { be32 copy_range; u8 copy_mode; } (packed)
    let mut params = (COPY_RANGE as u32).to_be_bytes().to_vec();
    params.push(libc::NFQNL_COPY_PACKET as u8);
    put_attr(&mut buf, NFQA_CFG_PARAMS, &params);
    put_attr(&mut buf, NFQA_CFG_QUEUE_MAXLEN, &QUEUE_MAXLEN.to_be_bytes());
    // GSO on or off as asked; fail-open explicitly off.
    let mask = (libc::NFQA_CFG_F_GSO | libc::NFQA_CFG_F_FAIL_OPEN) as u32;
    let flags = if gso { libc::NFQA_CFG_F_GSO as u32 } else { 0 };
    put_attr(&mut buf, NFQA_CFG_FLAGS, &flags.to_be_bytes());
    put_attr(&mut buf, NFQA_CFG_MASK, &mask.to_be_bytes());
    finish_msg(&mut buf, at);
    buf
}

/// Appends one verdict message (`MSG_VERDICT` or `MSG_VERDICT_BATCH`).
fn put_verdict(buf: &mut Vec<u8>, kind: u16, seq: u32, num: u16, verdict: u32, id: u32) {
    put_verdict_marked(buf, kind, seq, num, verdict, id, None);
}

/// A verdict that also sets the packet's `skb->mark` (`NFQA_MARK`).
fn put_verdict_marked(
    buf: &mut Vec<u8>,
    kind: u16,
    seq: u32,
    num: u16,
    verdict: u32,
    id: u32,
    mark: Option<u32>,
) {
    let at = start_msg(buf, kind, NLM_F_REQUEST, seq, num);
    // struct nfqnl_msg_verdict_hdr { be32 verdict; be32 id; }
    let mut hdr = [0u8; 8];
    hdr[..4].copy_from_slice(&verdict.to_be_bytes());
    hdr[4..].copy_from_slice(&id.to_be_bytes());
    put_attr(buf, NFQA_VERDICT_HDR, &hdr);
    if let Some(m) = mark {
        put_attr(buf, NFQA_MARK, &m.to_be_bytes());
    }
    finish_msg(buf, at);
}

/// Splits a buffer of whole netlink messages into runs of at most
/// `per_send` messages (messages differ in length: a marked verdict is longer).
fn message_runs(buf: &[u8], per_send: usize) -> Vec<&[u8]> {
    let mut runs = Vec::new();
    let (mut start, mut at, mut n) = (0, 0, 0);
    while at + 4 <= buf.len() {
        let len = ne32(&buf[at..]).unwrap_or(0) as usize;
        if len < NLMSG_HDRLEN {
            break;
        }
        at = (at + len).min(buf.len());
        n += 1;
        if n == per_send {
            runs.push(&buf[start..at]);
            (start, n) = (at, 0);
        }
    }
    if start < buf.len() {
        runs.push(&buf[start..]);
    }
    runs
}

fn be32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

fn be64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(..8)?.try_into().ok()?))
}

fn ne32(b: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

fn ne16(b: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(..2)?.try_into().ok()?))
}

/// Parses the attributes of one `NFQNL_MSG_PACKET` of queue `queue`; None
/// when it has no packet header.
fn parse_packet(queue: u16, mut attrs: &[u8]) -> Option<Packet> {
    let mut id = None;
    let mut cap_len = None;
    let mut gso = false;
    let mut stamp = None;
    let mut head = [0u8; COPY_RANGE];
    let mut head_len = 0usize;
    let mut payload_len = 0usize;
    while attrs.len() >= NLA_HDRLEN {
        let len = ne16(attrs)? as usize;
        let kind = ne16(&attrs[2..])? & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > attrs.len() {
            return None;
        }
        let data = &attrs[NLA_HDRLEN..len];
        match kind {
            // struct nfqnl_msg_packet_hdr { be32 packet_id; be16 hw_protocol; u8 hook; }
            NFQA_PACKET_HDR => id = be32(data),
            NFQA_CAP_LEN => cap_len = be32(data),
            NFQA_SKB_INFO => gso = be32(data).is_some_and(|f| f & NFQA_SKB_GSO != 0),
            // struct nfqnl_msg_packet_timestamp { be64 sec; be64 usec; }
            NFQA_TIMESTAMP => {
                let usec = data.get(8..).and_then(be64);
                stamp = be64(data)
                    .zip(usec)
                    .and_then(|(s, u)| Stamp::from_parts(s, u));
            }
            NFQA_PAYLOAD => {
                payload_len = data.len();
                head_len = data.len().min(COPY_RANGE);
                head[..head_len].copy_from_slice(&data[..head_len]);
            }
            _ => {}
        }
        let step = (len + 3) & !3;
        attrs = attrs.get(step..).unwrap_or(&[]);
    }
    Some(Packet {
        queue,
        id: id?,
        len: cap_len.unwrap_or(payload_len as u32),
        gso,
        stamp,
        head,
        head_len: head_len as u8,
    })
}

/// Splits one datagram into messages; malformed ones are skipped (a
/// datagram comes from the kernel, but never trust lengths).
fn parse_datagram(mut buf: &[u8], out: &mut impl FnMut(Message)) {
    while buf.len() >= NLMSG_HDRLEN {
        let Some(len) = ne32(buf).map(|l| l as usize) else {
            return;
        };
        if len < NLMSG_HDRLEN || len > buf.len() {
            return;
        }
        let kind = ne16(&buf[4..]).unwrap_or(0);
        let seq = ne32(&buf[8..]).unwrap_or(0);
        let body = &buf[NLMSG_HDRLEN..len];
        match kind {
            NLMSG_ERROR => {
                // struct nlmsgerr { int error; struct nlmsghdr msg; ... }; the
                // error carries the request's sequence number in its own
                // header, and a failure echoes the request (its nfgenmsg
                // names the queue; a success does not echo it).
                if let Some(err) = body.get(..4) {
                    let err = i32::from_ne_bytes([err[0], err[1], err[2], err[3]]);
                    let at = 4 + NLMSG_HDRLEN + 2;
                    let queue = body
                        .get(at..at + 2)
                        .map(|b| u16::from_be_bytes([b[0], b[1]]));
                    out(Message::Ack {
                        seq,
                        errno: -err,
                        queue,
                    });
                }
            }
            MSG_PACKET if body.len() >= NFGENMSG_LEN => {
                let res_id = u16::from_be_bytes([body[2], body[3]]);
                if let Some(p) = parse_packet(res_id, &body[NFGENMSG_LEN..]) {
                    out(Message::Packet(p));
                }
            }
            NLMSG_NOOP | NLMSG_DONE => {}
            _ => {}
        }
        let step = (len + 3) & !3;
        buf = buf.get(step..).unwrap_or(&[]);
    }
}

/// How many messages for queue `num` a datagram holds (packets and acks):
/// the parser's whole surface, for the fuzz target.
pub fn messages_in(buf: &[u8], num: u16) -> usize {
    let mut n = 0;
    parse_datagram(buf, &mut |m| match &m {
        Message::Packet(p) if p.queue == num => {
            // Touch what the emulator reads.
            n += p.head().len() & 1;
            n += 1;
        }
        Message::Packet(_) => {}
        Message::Ack { .. } => n += 1,
    });
    n
}

/// A clear one-line cause for a failed bind/config.
fn config_error(num: u16, errno: i32) -> EmulatorError {
    let hint = match errno {
        libc::EPERM => {
            // SAFETY: geteuid has no preconditions and cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                " (run as root)".to_string()
            } else {
                format!(
                    " (another process holds queue {num}? see /proc/net/netfilter/nfnetlink_queue)"
                )
            }
        }
        libc::EBUSY => format!(" (queue {num} is already bound)"),
        libc::EOPNOTSUPP => {
            " (kernel lacks nfnetlink_queue or the GSO flag; try modprobe nfnetlink_queue)".into()
        }
        _ => String::new(),
    };
    EmulatorError::BindRefused {
        num,
        source: OsText(io::Error::from_raw_os_error(errno)),
        hint,
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) -> bool {
    // SAFETY: `val` outlives the call and the length matches its type.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// The queue numbers as an error names them: "0 and 1".
fn nums_text(nums: &[u16]) -> String {
    let text: Vec<String> = nums.iter().map(u16::to_string).collect();
    text.join(" and ")
}

impl Socket {
    /// Opens a netlink socket, binds each queue of `nums` to it and
    /// configures them: headers only (64 bytes), 262144 packets max, GSO
    /// super-packets when `gso` (else the kernel segments before
    /// queueing), never fail-open.
    pub fn open(nums: &[u16], gso: bool) -> Result<Socket, EmulatorError> {
        // SAFETY: plain syscall; the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(EmulatorError::Call {
                call: "NFQUEUE: netlink socket failed",
                source: OsText(io::Error::last_os_error()),
            });
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SO_RCVBUFFORCE ignores rmem_max but needs CAP_NET_ADMIN; the plain
        // option is capped by net.core.rmem_max (the bind fails later anyway
        // without the capability).
        if !setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES) {
            setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES);
        }
        // An overrun must not turn into ENOBUFS on every later recv: the lost
        // notification already means a dropped packet, which the kernel counts.
        setsockopt_int(raw, libc::SOL_NETLINK, libc::NETLINK_NO_ENOBUFS, 1);
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `sa` is a valid sockaddr_nl and the length matches it.
        let rc = unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(EmulatorError::Call {
                call: "NFQUEUE: netlink bind failed",
                source: OsText(io::Error::last_os_error()),
            });
        }
        let mut q = Socket {
            fd,
            nums: nums.to_vec(),
            seq: 1,
            out: Vec::with_capacity(VERDICTS_PER_SEND * VERDICT_MSG_LEN),
            slots: vec![0u8; RECV_SLOTS * RECV_SLOT_BYTES],
            early: Vec::new(),
            verdict_errors: vec![0; nums.len()],
            truncated: 0,
        };
        for &num in nums {
            q.seq = q.seq.wrapping_add(1);
            let seq = q.seq;
            let msg = config_msg(num, seq, gso);
            q.send_all(&msg).map_err(|e| EmulatorError::Bind {
                num,
                source: OsText(e),
            })?;
            q.wait_ack(seq).map_err(|errno| config_error(num, errno))?;
        }
        Ok(q)
    }

    /// Errors the kernel reported for the verdicts of the `i`th queue.
    pub fn verdict_errors(&self, i: usize) -> u64 {
        self.verdict_errors.get(i).copied().unwrap_or(0)
    }

    /// Waits for the answer to request `seq`; Err(errno) when it failed or
    /// never came (ETIMEDOUT). Packets that arrive meanwhile are kept.
    fn wait_ack(&mut self, seq: u32) -> Result<(), i32> {
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_millis(ACK_TIMEOUT_MS as u64);
        loop {
            let mut answer = None;
            let mut got = Vec::new();
            let drained = self
                .recv_raw(&mut |m| match m {
                    Message::Ack { seq: s, errno, .. } if s == seq => answer = Some(errno),
                    Message::Ack { .. } => {}
                    Message::Packet(p) => got.push(p),
                })
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
            self.early.extend(got);
            match answer {
                Some(0) => return Ok(()),
                Some(errno) => return Err(errno),
                None => {}
            }
            if !drained {
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(libc::ETIMEDOUT);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis() as libc::c_int + 1) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e.raw_os_error().unwrap_or(libc::EIO));
                }
            }
        }
    }

    /// One `recvmmsg` round; calls `f` per message. Ok(true) when the socket
    /// is drained (fewer datagrams than slots, or EAGAIN).
    fn recv_raw(&mut self, f: &mut impl FnMut(Message)) -> io::Result<bool> {
        // SAFETY: iovec/mmsghdr/sockaddr_nl are plain data; zero is valid.
        let mut iov: [libc::iovec; RECV_SLOTS] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut names: [libc::sockaddr_nl; RECV_SLOTS] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; RECV_SLOTS] = unsafe { std::mem::zeroed() };
        let base = self.slots.as_mut_ptr();
        for i in 0..RECV_SLOTS {
            // SAFETY: slot i lies inside `self.slots` (RECV_SLOTS * RECV_SLOT_BYTES).
            iov[i].iov_base = unsafe { base.add(i * RECV_SLOT_BYTES) }.cast();
            iov[i].iov_len = RECV_SLOT_BYTES;
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
            hdrs[i].msg_hdr.msg_name = (&mut names[i] as *mut libc::sockaddr_nl).cast();
            hdrs[i].msg_hdr.msg_namelen =
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        }
        let n = loop {
            // SAFETY: every header points to live buffers of the stated sizes
            // (iov, names, slots), all of which outlive the call.
            let n = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    RECV_SLOTS as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(true),
                // Only possible if NETLINK_NO_ENOBUFS was refused: the kernel
                // dropped notifications (and so packets); keep going.
                Some(libc::ENOBUFS) => continue,
                _ => return Err(e),
            }
        };
        for i in 0..n {
            let h = &hdrs[i];
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                self.truncated += 1;
                continue;
            }
            if names[i].nl_pid != 0 {
                continue; // not from the kernel
            }
            let len = (h.msg_len as usize).min(RECV_SLOT_BYTES);
            let slot = &self.slots[i * RECV_SLOT_BYTES..i * RECV_SLOT_BYTES + len];
            parse_datagram(slot, f);
        }
        Ok(n < RECV_SLOTS)
    }

    /// Receives what is waiting (up to `rounds` × 64 datagrams): the
    /// packets of the `i`th queue into `out[i]`, in arrival order. Ok(true)
    /// when the socket is drained. Kernel errors for earlier verdicts are
    /// counted per queue (see [`Socket::verdict_errors`]), not returned.
    pub fn recv(&mut self, out: &mut [Vec<Packet>], rounds: usize) -> Result<bool, EmulatorError> {
        // Taken out for the call, so that the sink may use them while
        // `recv_raw` borrows the socket.
        let nums = std::mem::take(&mut self.nums);
        let mut errors = std::mem::take(&mut self.verdict_errors);
        let index = |queue: u16| nums.iter().position(|&n| n == queue);
        let mut sink = |m| match m {
            Message::Packet(p) => {
                if let Some(v) = index(p.queue).and_then(|i| out.get_mut(i)) {
                    v.push(p);
                }
            }
            Message::Ack { errno, queue, .. } if errno != 0 => {
                // A failure that names no queue of ours counts on the first.
                let i = queue.and_then(index).unwrap_or(0);
                if let Some(e) = errors.get_mut(i) {
                    *e += 1;
                }
            }
            Message::Ack { .. } => {}
        };
        for p in std::mem::take(&mut self.early) {
            sink(Message::Packet(p));
        }
        let mut res = Ok(false);
        for _ in 0..rounds.max(1) {
            res = self.recv_raw(&mut sink);
            if !matches!(res, Ok(false)) {
                break;
            }
        }
        let res = res.map_err(|e| EmulatorError::Recv {
            queues: nums_text(&nums),
            source: OsText(e),
        });
        self.nums = nums;
        self.verdict_errors = errors;
        res
    }

    /// Sends the verdicts each direction queued, in one `send` (or several
    /// of [`VERDICTS_PER_SEND`] messages when there are many), each
    /// direction's in its own order. The kernel handles a netlink request
    /// during `send`, so on return every verdict has been applied (or its
    /// error queued for `recv`).
    pub fn flush(&mut self, verdicts: &mut [&mut Verdicts]) -> Result<(), EmulatorError> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        for v in verdicts.iter_mut() {
            out.extend_from_slice(&v.out);
            v.out.clear();
        }
        let mut res = Ok(());
        for chunk in message_runs(&out, VERDICTS_PER_SEND) {
            if let Err(e) = self.send_all(chunk) {
                res = Err(EmulatorError::Verdict {
                    queues: nums_text(&self.nums),
                    source: OsText(e),
                });
                break;
            }
        }
        self.out = out;
        res
    }

    fn send_all(&self, buf: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `buf` is valid for `buf.len()` bytes during the call.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return if n as usize == buf.len() {
                    Ok(())
                } else {
                    Err(io::Error::other("short netlink send"))
                };
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Verdicts {
    /// No verdicts yet, for queue `num`.
    pub fn new(num: u16) -> Verdicts {
        Verdicts {
            num,
            seq: 0,
            out: Vec::with_capacity(VERDICTS_PER_SEND * VERDICT_MSG_LEN),
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Queues `NF_DROP` for packet `id` (sent by [`Socket::flush`], in order).
    pub fn drop_packet(&mut self, id: u32) {
        let seq = self.next_seq();
        put_verdict(
            &mut self.out,
            MSG_VERDICT,
            seq,
            self.num,
            libc::NF_DROP as u32,
            id,
        );
    }

    /// Queues `NF_ACCEPT` for packet `id` alone, setting its mark to `mark`
    /// when given (an iptables rule after the queue acts on the mark).
    pub fn accept_one(&mut self, id: u32, mark: Option<u32>) {
        let seq = self.next_seq();
        put_verdict_marked(
            &mut self.out,
            MSG_VERDICT,
            seq,
            self.num,
            libc::NF_ACCEPT as u32,
            id,
            mark,
        );
    }

    /// Queues one `NF_ACCEPT` batch verdict for every held packet with id <= `id`.
    /// Drops queued before it are sent first, so a dropped packet is never accepted.
    pub fn accept_upto(&mut self, id: u32) {
        let seq = self.next_seq();
        put_verdict(
            &mut self.out,
            MSG_VERDICT_BATCH,
            seq,
            self.num,
            libc::NF_ACCEPT as u32,
            id,
        );
    }
}

/// Reads the kernel's counters of queue `num` in this network namespace;
/// None when the queue is not bound or the file is unreadable.
pub fn kernel_counters(num: u16) -> Option<KernelCounters> {
    let text = std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue").ok()?;
    parse_kernel_counters(&text, num)
}

/// Columns: queue, portid, held, copy mode, copy range, queue dropped,
/// user dropped, last id, 1.
fn parse_kernel_counters(text: &str, num: u16) -> Option<KernelCounters> {
    text.lines().find_map(|line| {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        (f.len() >= 7 && f[0] == u64::from(num)).then(|| KernelCounters {
            held: f[2],
            queue_dropped: f[5],
            user_dropped: f[6],
        })
    })
}

#[cfg(test)]
mod tests;
