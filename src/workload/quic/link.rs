//! One QUIC connection on one of the engine's UDP flows: quinn-proto's
//! endpoint and connection (the protocol, sans IO) driven by the worker's
//! event loop. The socket is the flow's, connected to the other end by
//! control's hello exchange; quinn-udp sends with GSO and ECN and
//! receives with GRO, as quinn itself does.
//!
//! A workload over QUIC holds a `Link`, calls `input` when the socket is
//! readable, does its stream work on the connection, then `output`, which
//! sends what the connection has, hands the endpoint its events, and arms
//! the connection's next timer; `timeout` when that timer fires.

use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use mio::net::UdpSocket;
use mio::{Interest, Registry, Token};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, Event,
    ServerConfig,
};
use quinn_udp::{RecvMeta, UdpSocketState};

use crate::engine::flow::{Ctx, BUDGET};
use crate::model::flow::QuicFlowStats;
use std::os::fd::AsRawFd;

/// What carries QUIC here, for results.
pub const IMPLEMENTATION: &str = "quinn-proto 0.11";
use crate::engine::udp::Header;

/// Datagrams' room when received: GRO coalesces up to 64 KiB.
pub const RECV_ROOM: usize = 64 * 1024;

/// GRO batches one receive call takes (recvmmsg): 4 of up to 64 KiB, so a
/// flow's receive buffer is 256 KiB (a thousand flows: 256 MiB), and a call
/// still moves up to 180 datagrams of 1,452 bytes.
pub const RECV_SLOTS: usize = 4;

/// One receive call's buffers over `rx` (`RECV_SLOTS` rooms), on the
/// stack: no allocation per call.
pub fn recv_slices(rx: &mut [u8]) -> [IoSliceMut<'_>; RECV_SLOTS] {
    let mut rooms = rx.chunks_mut(RECV_ROOM);
    std::array::from_fn(|_| IoSliceMut::new(rooms.next().expect("RECV_SLOTS rooms")))
}

/// The most UDP payload one GSO send may carry (the IP length field).
const GSO_BYTES: usize = 65_507;

/// The datagrams of one received buffer and their ECN mark: a GRO batch
/// copied once out of `buf` (quinn's own endpoint does the same) and split
/// at its stride without copying.
pub fn datagrams(
    meta: &RecvMeta,
    buf: &[u8],
) -> (
    Option<quinn_proto::EcnCodepoint>,
    impl Iterator<Item = BytesMut>,
) {
    let mut batch = BytesMut::from(&buf[..meta.len]);
    let stride = meta.stride.max(1);
    let ecn = meta
        .ecn
        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
    let each = std::iter::from_fn(move || {
        (!batch.is_empty()).then(|| batch.split_to(stride.min(batch.len())))
    });
    (ecn, each)
}

/// What a link counted of its datagrams (for the report's lines).
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkCounts {
    /// UDP datagrams sent and received (GSO and GRO batches counted by
    /// their segments).
    pub datagrams_tx: u64,
    pub datagrams_rx: u64,
    /// sendmsg and recvmmsg calls that moved data.
    pub send_calls: u64,
    pub recv_calls: u64,
}

/// A transmit the socket would not take yet: its bytes are `Link::tx`.
#[derive(Clone, Copy)]
struct Pending {
    size: usize,
    segment: Option<usize>,
    ecn: Option<quinn_udp::EcnCodepoint>,
}

/// The figures of connections a link has retired (closed and drained),
/// for the report of a flow that made many (quic-crr).
#[derive(Clone, Copy, Debug, Default)]
struct Retired {
    connections: u64,
    zero_rtt: u64,
    sent: u64,
    lost: u64,
    congestion_events: u64,
    data_blocked: u64,
}

pub struct Link {
    sock: UdpSocket,
    udp: UdpSocketState,
    endpoint: Endpoint,
    /// The server's config (accepting the client's connection); None on
    /// the client, which connects at once.
    server: Option<Arc<ServerConfig>>,
    /// The client's config and the name it verifies, for its next
    /// connection (`reconnect`).
    client: Option<(ClientConfig, String)>,
    conn: Option<(ConnectionHandle, Connection)>,
    /// Connections closed and not yet drained: they still answer their
    /// peer's last packets until quinn lets them go.
    closing: Vec<(ConnectionHandle, Connection)>,
    retired: Retired,
    /// Counts the connections that became current: a flow's streams
    /// start over when it moves.
    generation: u64,
    peer: SocketAddr,
    /// Control's hellos carry this test's cookie: a late resend of one is
    /// dropped before quinn sees it.
    cookie: u64,
    tx: Vec<u8>,
    pending: Option<Pending>,
    /// The closing connections' last packets (`tx` may hold a pending one).
    farewell: Vec<u8>,
    rx: Vec<u8>,
    armed: Option<Instant>,
    /// The connection's application events, for the workload.
    pub events: VecDeque<Event>,
    pub counts: LinkCounts,
}

impl Link {
    fn new(sock: std::net::UdpSocket, cookie: u64) -> io::Result<(Link, SocketAddr)> {
        super::linger::release();
        let peer = sock.peer_addr()?;
        let sock = UdpSocket::from_std(sock);
        let udp = UdpSocketState::new((&sock).into())?;
        let endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        Ok((
            Link {
                sock,
                udp,
                endpoint,
                server: None,
                client: None,
                conn: None,
                closing: Vec::new(),
                retired: Retired::default(),
                generation: 0,
                peer,
                cookie,
                tx: Vec::with_capacity(RECV_ROOM),
                pending: None,
                farewell: Vec::new(),
                rx: vec![0; RECV_ROOM * RECV_SLOTS],
                armed: None,
                events: VecDeque::new(),
                counts: LinkCounts::default(),
            },
            peer,
        ))
    }

    /// The client's end: the connection is started at once (its first
    /// flight goes out at the first `output`).
    pub fn client(
        sock: std::net::UdpSocket,
        cookie: u64,
        config: ClientConfig,
        server_name: &str,
    ) -> io::Result<Link> {
        let (mut link, _) = Link::new(sock, cookie)?;
        link.client = Some((config, server_name.to_string()));
        link.reconnect(Instant::now())?;
        Ok(link)
    }

    /// The client's next connection: the current one is closed (and
    /// drains beside it) and a new one starts on the same socket, its
    /// first flight going out at the next `output`.
    pub fn reconnect(&mut self, now: Instant) -> io::Result<()> {
        let Some((config, name)) = self.client.clone() else {
            return Err(io::Error::other("a QUIC server does not connect"));
        };
        self.retire(now);
        let (ch, conn) = self
            .endpoint
            .connect(now, config, self.peer, &name)
            .map_err(|e| io::Error::other(format!("QUIC connect: {e}")))?;
        self.conn = Some((ch, conn));
        self.generation += 1;
        self.events.clear();
        Ok(())
    }

    /// Closes the current connection (if open) and lets it drain.
    fn retire(&mut self, now: Instant) {
        if let Some((ch, mut conn)) = self.conn.take() {
            if !conn.is_closed() {
                conn.close(now, 0u32.into(), bytes::Bytes::from_static(b"done"));
            }
            self.closing.push((ch, conn));
        }
    }

    /// The server's end: it accepts the first connection that arrives.
    pub fn server(
        sock: std::net::UdpSocket,
        cookie: u64,
        config: Arc<ServerConfig>,
    ) -> io::Result<Link> {
        let (mut link, _) = Link::new(sock, cookie)?;
        link.endpoint.set_server_config(Some(config.clone()));
        link.server = Some(config);
        Ok(link)
    }

    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(
            &mut self.sock,
            token,
            Interest::READABLE | Interest::WRITABLE,
        )
    }

    /// Which connection is current: it moves on each new one.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The connection, once there is one (the server's: once accepted).
    pub fn conn(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut().map(|(_, c)| c)
    }

    /// Reads what the socket has (up to the budget) into the connection.
    /// Ok(true): the budget ran out with more to read.
    pub fn input(&mut self, now: Instant) -> io::Result<bool> {
        let mut moved = 0;
        let mut metas = [RecvMeta::default(); RECV_SLOTS];
        loop {
            let n = {
                let mut bufs = recv_slices(&mut self.rx);
                match self.udp.recv((&self.sock).into(), &mut bufs, &mut metas) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // An ICMP error: the peer's port is closed. Before any
                    // handshake completed, nothing listens there (a wrong
                    // port, a perf server that is not running); later, the
                    // peer went away (an error the flow drops once the
                    // test is stopping, when every end closes).
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        return Err(self.unreachable());
                    }
                    Err(e) => return Err(e),
                }
            };
            self.counts.recv_calls += 1;
            for (i, meta) in metas.iter().enumerate().take(n) {
                moved += meta.len;
                let (ecn, batch) = datagrams(meta, &self.rx[i * RECV_ROOM..]);
                for d in batch {
                    self.counts.datagrams_rx += 1;
                    if Header::read(&d, self.cookie).is_some() {
                        // A hello resent before control's ack arrived.
                        continue;
                    }
                    self.datagram(now, meta.addr, meta.dst_ip, ecn, d);
                }
            }
            if moved >= BUDGET {
                return Ok(true);
            }
        }
    }

    /// One datagram into the endpoint and on to its connection.
    fn datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dst: Option<std::net::IpAddr>,
        ecn: Option<quinn_proto::EcnCodepoint>,
        data: BytesMut,
    ) {
        let mut resp = Vec::new();
        match self.endpoint.handle(now, from, dst, ecn, data, &mut resp) {
            Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                let all = self.conn.iter_mut().chain(self.closing.iter_mut());
                if let Some((_, conn)) = all.into_iter().find(|(mine, _)| *mine == ch) {
                    conn.handle_event(ev);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                if self.server.is_none() {
                    let t = self.endpoint.refuse(incoming, &mut resp);
                    self.send_now(&resp[..t.size]);
                    return;
                }
                // One connection at a time per flow: the client moved on
                // to a new one (quic-crr), so the old one is closed.
                self.retire(now);
                match self.endpoint.accept(incoming, now, &mut resp, None) {
                    Ok((ch, conn)) => {
                        self.conn = Some((ch, conn));
                        self.generation += 1;
                        self.events.clear();
                    }
                    Err(e) => {
                        if let Some(t) = e.response {
                            self.send_now(&resp[..t.size]);
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => self.send_now(&resp[..t.size]),
            None => {}
        }
    }

    /// A datagram the endpoint answers by itself: sent if the socket takes
    /// it, else dropped (the peer retransmits).
    fn send_now(&mut self, data: &[u8]) {
        let t = quinn_udp::Transmit {
            destination: self.peer,
            ecn: None,
            contents: data,
            segment_size: None,
            src_ip: None,
        };
        if self.udp.try_send((&self.sock).into(), &t).is_ok() {
            self.counts.datagrams_tx += 1;
            self.counts.send_calls += 1;
        }
    }

    /// Sends what the connection has to send until it has nothing, the
    /// socket is full or the budget is used; then the endpoint's events,
    /// the application's events (into `events`) and the next timer.
    /// Ok(true): the budget ran out with more to send.
    pub fn output(&mut self, cx: &mut Ctx<'_>) -> io::Result<bool> {
        let now = cx.now;
        let more = self.transmit(now)?;
        if !self.closing.is_empty() {
            self.farewells(now);
        }
        self.settle(cx);
        Ok(more)
    }

    /// What the closing connections still send (their CONNECTION_CLOSE,
    /// again when the peer's packets keep coming): best effort, a full
    /// socket drops it.
    fn farewells(&mut self, now: Instant) {
        let buf = &mut self.farewell;
        for (_, conn) in self.closing.iter_mut() {
            buf.clear();
            while let Some(t) = conn.poll_transmit(now, 1, buf) {
                let tx = quinn_udp::Transmit {
                    destination: self.peer,
                    ecn: None,
                    contents: &buf[..t.size],
                    segment_size: None,
                    src_ip: None,
                };
                if self.udp.try_send((&self.sock).into(), &tx).is_ok() {
                    self.counts.datagrams_tx += 1;
                    self.counts.send_calls += 1;
                }
                buf.clear();
            }
        }
    }

    fn transmit(&mut self, now: Instant) -> io::Result<bool> {
        let Some((_, conn)) = self.conn.as_mut() else {
            return Ok(false);
        };
        let mut moved = 0;
        // A GSO send carries at most 64 KiB of UDP payload: the kernel
        // refuses more (EMSGSIZE), so the batch is cut to what fits at the
        // path's current MTU (40 datagrams of 1452 bytes).
        let fits = GSO_BYTES / usize::from(conn.current_mtu()).max(1);
        let max = self.udp.max_gso_segments().min(fits).max(1);
        loop {
            let p = match self.pending.take() {
                Some(p) => p,
                None => {
                    self.tx.clear();
                    let Some(t) = conn.poll_transmit(now, max, &mut self.tx) else {
                        return Ok(false);
                    };
                    Pending {
                        size: t.size,
                        segment: t.segment_size,
                        ecn: t
                            .ecn
                            .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
                    }
                }
            };
            let t = quinn_udp::Transmit {
                destination: self.peer,
                ecn: p.ecn,
                contents: &self.tx[..p.size],
                segment_size: p.segment,
                src_ip: None,
            };
            match self.udp.try_send((&self.sock).into(), &t) {
                Ok(()) => {
                    self.counts.send_calls += 1;
                    self.counts.datagrams_tx += p.segment.map_or(1, |s| p.size.div_ceil(s)) as u64;
                    moved += p.size;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The writable edge resumes it.
                    self.pending = Some(p);
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.pending = Some(p),
                // The peer's port is closed (an ICMP error of an earlier
                // datagram, reported here instead of at the next read).
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                // A path MTU probe larger than the path: the probe is lost,
                // which is what MTU discovery expects.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) && p.segment.is_none() => {}
                Err(e) => return Err(e),
            }
            if moved >= BUDGET {
                return Ok(true);
            }
        }
        Err(self.unreachable())
    }

    /// The endpoint's and the application's events, and the timer.
    fn settle(&mut self, cx: &mut Ctx<'_>) {
        if !self.closing.is_empty() {
            self.drain();
        }
        let Some((ch, conn)) = self.conn.as_mut() else {
            return;
        };
        while let Some(ev) = conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(*ch, ev) {
                conn.handle_event(back);
            }
        }
        while let Some(ev) = conn.poll() {
            self.events.push_back(ev);
        }
        let closing = self
            .closing
            .iter_mut()
            .filter_map(|(_, c)| c.poll_timeout());
        match conn.poll_timeout().into_iter().chain(closing).min() {
            Some(at) if self.armed != Some(at) => {
                self.armed = Some(at);
                cx.schedule(at);
            }
            Some(_) => {}
            None => self.armed = None,
        }
    }

    /// The closing connections' endpoint events; the drained ones are
    /// let go (the endpoint forgets their IDs) and their figures kept.
    fn drain(&mut self) {
        let endpoint = &mut self.endpoint;
        let retired = &mut self.retired;
        self.closing.retain_mut(|(ch, conn)| {
            while let Some(ev) = conn.poll_endpoint_events() {
                if let Some(back) = endpoint.handle_event(*ch, ev) {
                    conn.handle_event(back);
                }
            }
            while conn.poll().is_some() {}
            if !conn.is_drained() {
                return true;
            }
            let s = conn.stats();
            retired.connections += 1;
            retired.zero_rtt += u64::from(took_0rtt(conn));
            retired.sent += s.path.sent_packets;
            retired.lost += s.path.lost_packets;
            retired.congestion_events += s.path.congestion_events;
            retired.data_blocked += s.frame_tx.data_blocked + s.frame_tx.stream_data_blocked;
            false
        });
    }

    /// The connection's timer fired (or an earlier one, already handled:
    /// quinn ignores a call before its deadline).
    pub fn timeout(&mut self, now: Instant) {
        if self.armed.is_some_and(|at| at <= now) {
            self.armed = None;
        }
        let all = self.conn.iter_mut().chain(self.closing.iter_mut());
        for (_, conn) in all {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
    }

    /// Why the peer's port is unreachable, in words.
    fn unreachable(&self) -> io::Error {
        let first =
            self.generation <= 1 && self.conn.as_ref().is_some_and(|(_, c)| c.is_handshaking());
        let why = match first {
            true => format!("nothing answers QUIC at {} (port unreachable)", self.peer),
            false => format!(
                "the QUIC peer at {} went away (its port is unreachable)",
                self.peer
            ),
        };
        io::Error::new(io::ErrorKind::ConnectionRefused, why)
    }

    /// Sends CONNECTION_CLOSE (best effort): the peer's end stops at once
    /// instead of at its idle timeout.
    pub fn close(&mut self, reason: &'static [u8]) {
        let now = Instant::now();
        if let Some((_, conn)) = self.conn.as_mut() {
            if conn.is_closed() {
                return;
            }
            conn.close(now, 0u32.into(), bytes::Bytes::from_static(reason));
            self.pending = None;
            let _ = self.transmit(now);
        }
    }

    /// The socket's own address and its peer's.
    pub fn addresses(&self) -> (String, String) {
        (
            self.sock
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            self.peer.to_string(),
        )
    }

    /// The socket buffers the kernel granted.
    pub fn buffers(&self) -> (Option<u32>, Option<u32>) {
        crate::measure::tcpinfo::granted_buffers(self.sock.as_raw_fd())
    }

    /// The connection's own view of its path and its datagrams (with the
    /// packets of the connections it made before, if it made several).
    pub fn report(&self, cc: &str) -> Option<QuicFlowStats> {
        // The path as the last connection that got going saw it: a new
        // one still in its handshake has not sampled its round trip.
        let current = self.conn.as_ref().filter(|(_, c)| !c.is_handshaking());
        let (_, c) = current.or(self.closing.last()).or(self.conn.as_ref())?;
        let mut s = c.stats();
        let mut r = self.retired;
        let all = self.conn.iter().chain(self.closing.iter()).map(|(_, c)| c);
        let others = all.filter(|o| !std::ptr::eq(*o, c));
        for o in others {
            let os = o.stats();
            r.sent += os.path.sent_packets;
            r.lost += os.path.lost_packets;
            r.congestion_events += os.path.congestion_events;
            r.data_blocked += os.frame_tx.data_blocked + os.frame_tx.stream_data_blocked;
        }
        let open = (self.closing.len() + usize::from(self.conn.is_some())) as u64;
        let zero_rtt = self
            .conn
            .iter()
            .map(|(_, c)| c)
            .chain(self.closing.iter().map(|(_, c)| c));
        let zero_rtt = zero_rtt.filter(|c| took_0rtt(c)).count() as u64;

        s.path.sent_packets += r.sent;
        s.path.lost_packets += r.lost;
        s.path.congestion_events += r.congestion_events;
        s.frame_tx.data_blocked += r.data_blocked;
        Some(QuicFlowStats {
            implementation: IMPLEMENTATION.into(),
            congestion_control: cc.into(),
            rtt_us: s.path.rtt.as_secs_f64() * 1e6,
            min_rtt_us: s.path.min_rtt.as_secs_f64() * 1e6,
            cwnd: s.path.cwnd,
            congestion_events: s.path.congestion_events,
            packets_sent: s.path.sent_packets,
            packets_lost: s.path.lost_packets,
            mtu: s.path.current_mtu,
            datagrams_tx: self.counts.datagrams_tx,
            datagrams_rx: self.counts.datagrams_rx,
            send_calls: self.counts.send_calls,
            recv_calls: self.counts.recv_calls,
            data_blocked: s.frame_tx.data_blocked + s.frame_tx.stream_data_blocked,
            // One connection (a persistent flow) writes none.
            connections: Some(r.connections + open).filter(|n| *n > 1).unwrap_or(0),
            zero_rtt: r.zero_rtt + zero_rtt,
        })
    }
}

/// Whether a connection's request went as 0-RTT early data: the server
/// accepted it (a client's view once the handshake is done), or took it.
pub fn took_0rtt(c: &Connection) -> bool {
    if c.side().is_client() {
        c.accepted_0rtt()
    } else {
        c.has_0rtt()
    }
}

impl Drop for Link {
    /// Sends CONNECTION_CLOSE and holds the socket a few round trips more
    /// (`linger`), for the peer's packets already on their way.
    fn drop(&mut self) {
        self.close(b"done");
        let rtt = self.conn.as_ref().map(|(_, c)| c.rtt()).unwrap_or_default();
        super::linger::hold(&self.sock, super::linger::time(rtt));
    }
}
