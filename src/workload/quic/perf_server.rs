//! A QUIC perf server (`linerate serve --quic-perf ADDR`): the server half
//! of the common QUIC performance protocol (draft-banks-quic-performance,
//! ALPN "perf"), so that another tool's perf client (quinn's `perf client`)
//! can measure against a linerate agent. Each stream carries a request: 8
//! bytes giving the size of the response wanted, then the upload, which is
//! read to its end; the response goes back on the same stream (a
//! bidirectional one) or on a new unidirectional stream.
//!
//! One thread, one unconnected UDP socket, one quinn-proto endpoint with
//! every client's connection, driven by a mio loop as the engine's workers
//! drive a test's flows. Like `iperf3 -s`, whoever reaches the port can
//! make this host send: each connection ends after `limit` (the agent's
//! `--max-duration`).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, ServerConfig,
};
use quinn_udp::{RecvMeta, UdpSocketState};

use super::link::{recv_slices, RECV_ROOM, RECV_SLOTS};
use super::respond::{Responder, Served};

/// The most UDP payload one GSO send carries.
const GSO_BYTES: usize = 65_507;

struct Client {
    conn: Connection,
    responder: Responder,
    started: Instant,
}

pub struct PerfServer {
    poll: Poll,
    sock: UdpSocket,
    udp: UdpSocketState,
    endpoint: Endpoint,
    config: Arc<ServerConfig>,
    clients: HashMap<ConnectionHandle, Client>,
    rx: Vec<u8>,
    tx: Vec<u8>,
    payload: Bytes,
    limit: Duration,
    /// What the connections that ended served, and how many there were.
    ended: Served,
    connections: u64,
}

impl PerfServer {
    /// Binds `addr` with the server config `config` (ALPN "perf").
    pub fn bind(addr: SocketAddr, config: Arc<ServerConfig>, limit: Duration) -> io::Result<Self> {
        let std = std::net::UdpSocket::bind(addr)?;
        let r = socket2::SockRef::from(&std);
        r.set_recv_buffer_size(4 << 20)?;
        r.set_send_buffer_size(4 << 20)?;
        let mut sock = UdpSocket::from_std(std);
        let udp = UdpSocketState::new((&sock).into())?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut sock, Token(0), Interest::READABLE | Interest::WRITABLE)?;
        let endpoint = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(config.clone()),
            true,
            None,
        );
        Ok(PerfServer {
            poll,
            sock,
            udp,
            endpoint,
            config,
            clients: HashMap::new(),
            rx: vec![0; RECV_ROOM * RECV_SLOTS],
            tx: Vec::with_capacity(GSO_BYTES),
            payload: Bytes::from(vec![42u8; 1 << 20]),
            limit,
            ended: Served::default(),
            connections: 0,
        })
    }

    /// What it served, over every connection so far.
    pub fn served(&self) -> Served {
        let mut s = self.ended;
        for c in self.clients.values() {
            s.add(&c.responder.served);
        }
        s.connections = self.connections;
        s
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Serves until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = Events::with_capacity(16);
        let mut more = false;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let next = self
                .clients
                .values_mut()
                .filter_map(|c| c.conn.poll_timeout())
                .min();
            let wait = next
                .map(|t| t.saturating_duration_since(now))
                .unwrap_or(Duration::from_millis(50))
                .min(Duration::from_millis(50));
            // A response cut by its budget goes on at once.
            let wait = if more { Duration::ZERO } else { wait };
            crate::engine::wait::events(&mut self.poll, &mut events, wait)?;
            let now = Instant::now();
            self.input(now)?;
            for c in self.clients.values_mut() {
                if c.conn.poll_timeout().is_some_and(|t| t <= now) {
                    c.conn.handle_timeout(now);
                }
                if now.duration_since(c.started) > self.limit && !c.conn.is_closed() {
                    c.conn
                        .close(now, 0u32.into(), Bytes::from_static(b"time limit"));
                }
            }
            more = self.work();
            self.output(now)?;
        }
        Ok(())
    }

    /// Reads what the socket has into the endpoint and its connections.
    fn input(&mut self, now: Instant) -> io::Result<()> {
        let mut metas = [RecvMeta::default(); RECV_SLOTS];
        loop {
            let n = {
                let mut bufs = recv_slices(&mut self.rx);
                match self.udp.recv((&self.sock).into(), &mut bufs, &mut metas) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e),
                }
            };
            for (i, meta) in metas.iter().enumerate().take(n) {
                let (ecn, batch) = super::link::datagrams(meta, &self.rx[i * RECV_ROOM..]);
                for d in batch {
                    self.datagram(now, meta.addr, meta.dst_ip, ecn, d);
                }
            }
        }
    }

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
                if let Some(c) = self.clients.get_mut(&ch) {
                    c.conn.handle_event(ev);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                match self
                    .endpoint
                    .accept(incoming, now, &mut resp, Some(self.config.clone()))
                {
                    Ok((ch, conn)) => {
                        self.connections += 1;
                        self.clients.insert(
                            ch,
                            Client {
                                conn,
                                responder: Responder::new(self.payload.clone()),
                                started: now,
                            },
                        );
                    }
                    Err(e) => {
                        if let Some(t) = e.response {
                            send(&self.udp, &self.sock, from, &resp[..t.size], None, None);
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => {
                send(&self.udp, &self.sock, from, &resp[..t.size], None, None);
            }
            None => {}
        }
    }

    /// Every connection's streams: new requests, their reads, responses.
    /// A client that breaks the protocol is closed.
    /// True: a responder's budget ran out with more to send.
    fn work(&mut self) -> bool {
        let now = Instant::now();
        let mut more = false;
        for c in self.clients.values_mut() {
            while let Some(ev) = c.conn.poll() {
                if let quinn_proto::Event::ConnectionLost { .. } = ev {
                    c.responder.lost();
                }
            }
            match c.responder.serve(&mut c.conn) {
                Ok(m) => more |= m,
                Err(e) => {
                    let reason = Bytes::from(e.to_string().into_bytes());
                    c.conn.close(now, 1u32.into(), reason);
                }
            }
        }
        more
    }

    /// Every connection's datagrams out, its endpoint events, and the
    /// drained ones dropped.
    fn output(&mut self, now: Instant) -> io::Result<()> {
        let max = self.udp.max_gso_segments().max(1);
        let mut gone = Vec::new();
        for (&ch, c) in self.clients.iter_mut() {
            let fits = GSO_BYTES / usize::from(c.conn.current_mtu()).max(1);
            loop {
                self.tx.clear();
                let Some(t) = c
                    .conn
                    .poll_transmit(now, max.min(fits).max(1), &mut self.tx)
                else {
                    break;
                };
                let ecn = t
                    .ecn
                    .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8));
                if !send(
                    &self.udp,
                    &self.sock,
                    t.destination,
                    &self.tx[..t.size],
                    t.segment_size,
                    ecn,
                ) {
                    // The socket is full: the packet counts as lost and
                    // QUIC sends it again (the writable edge wakes us).
                    break;
                }
            }
            while let Some(ev) = c.conn.poll_endpoint_events() {
                if let Some(back) = self.endpoint.handle_event(ch, ev) {
                    c.conn.handle_event(back);
                }
            }
            if c.conn.is_drained() {
                gone.push(ch);
            }
        }
        for ch in gone {
            if let Some(c) = self.clients.remove(&ch) {
                self.ended.add(&c.responder.served);
            }
        }
        Ok(())
    }
}

/// Sends one transmit; false when the socket would block.
fn send(
    udp: &UdpSocketState,
    sock: &UdpSocket,
    to: SocketAddr,
    data: &[u8],
    segment: Option<usize>,
    ecn: Option<quinn_udp::EcnCodepoint>,
) -> bool {
    let t = quinn_udp::Transmit {
        destination: to,
        ecn,
        contents: data,
        segment_size: segment,
        src_ip: None,
    };
    !matches!(udp.try_send(sock.into(), &t), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}
