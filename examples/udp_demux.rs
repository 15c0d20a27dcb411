//! Bench helper for issue 12's design question: should the agent give each
//! UDP flow a connected socket of its own (what linerate does), or receive
//! every flow on one shared socket (a SO_REUSEPORT group of one per
//! worker) and tell flows apart by the header? Same sender, same receiver
//! loop (epoll + recvmmsg batches of 32), only the demultiplexing differs.
//! Loopback only, bounded in time. Run by `bench/udp_demux.sh`.
//!
//! Usage: udp_demux per-flow|shared FLOWS SECONDS
//! Prints: mode flows received_per_s receiver_us_per_packet drop_pct

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate::engine::udp::{Header, Kind, RecvBatch, SendBatch};
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Socket, Type};

const BATCH: usize = 32;
const MESSAGE: usize = 64;

fn udp(reuseport: bool) -> Socket {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, None).expect("socket");
    s.set_nonblocking(true).unwrap();
    if reuseport {
        s.set_reuse_address(true).unwrap();
        s.set_reuse_port(true).unwrap();
    }
    linerate::engine::sockopt::set_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
        .unwrap();
    s
}

fn thread_cpu() -> Duration {
    // SAFETY: getrusage fills the struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 || !matches!(args[1].as_str(), "per-flow" | "shared") {
        eprintln!("usage: udp_demux per-flow|shared FLOWS SECONDS");
        std::process::exit(2);
    }
    let shared = args[1] == "shared";
    let flows: usize = args[2].parse().expect("FLOWS");
    let secs: f64 = args[3].parse().expect("SECONDS");

    // The receiver's port, then one client socket per flow connected to it.
    let listen = udp(true);
    listen
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    let port: SocketAddr = listen.local_addr().unwrap().as_socket().unwrap();
    let mut clients = Vec::new();
    let mut receivers: Vec<UdpSocket> = Vec::new();
    for _ in 0..flows {
        let c = udp(false);
        c.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        c.connect(&port.into()).unwrap();
        if !shared {
            let r = udp(true);
            r.bind(&port.into()).unwrap();
            r.connect(&c.local_addr().unwrap()).unwrap();
            receivers.push(r.into());
        }
        clients.push(UdpSocket::from(c));
    }
    if shared {
        receivers.push(listen.into());
    } else {
        drop(listen);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = stop.clone();
    let sender = std::thread::spawn(move || {
        let mut batches: Vec<SendBatch> = (0..flows)
            .map(|f| {
                let head = Header {
                    kind: Kind::Data,
                    flow: f as u32,
                    cookie: 7,
                    seq: 0,
                    sent_ns: 0,
                };
                SendBatch::new(BATCH, MESSAGE, &[0u8; MESSAGE], head)
            })
            .collect();
        let mut sent = 0u64;
        while !stop_tx.load(Ordering::Relaxed) {
            for (c, b) in clients.iter().zip(batches.iter_mut()) {
                sent += b.send(c.as_raw_fd(), BATCH, None).unwrap_or(0) as u64;
            }
        }
        sent
    });

    let mut poll = Poll::new().unwrap();
    let mut mio_socks: Vec<mio::net::UdpSocket> = receivers
        .into_iter()
        .map(mio::net::UdpSocket::from_std)
        .collect();
    for (i, s) in mio_socks.iter_mut().enumerate() {
        poll.registry()
            .register(s, Token(i), Interest::READABLE)
            .unwrap();
    }
    let mut events = Events::with_capacity(1024);
    let mut rx = RecvBatch::new(BATCH, MESSAGE + 64);
    let mut per_flow = vec![0u64; flows];
    let mut drops = vec![0u32; mio_socks.len()];
    // A warm-up second, then the window.
    let warm = Instant::now() + Duration::from_secs(1);
    let end = warm + Duration::from_secs_f64(secs);
    let (mut got, mut cpu0, mut drop0) = (0u64, Duration::ZERO, 0u64);
    let mut started = false;
    loop {
        let now = Instant::now();
        if !started && now >= warm {
            started = true;
            got = 0;
            cpu0 = thread_cpu();
            drop0 = drops.iter().map(|&d| d as u64).sum();
        }
        if now >= end {
            break;
        }
        poll.poll(&mut events, Some(Duration::from_millis(10)))
            .unwrap();
        for ev in &events {
            let i = ev.token().0;
            let fd = mio_socks[i].as_raw_fd();
            while let Ok(n) = rx.recv(fd) {
                if n == 0 {
                    break;
                }
                for k in 0..n {
                    let d = rx.datagram(k);
                    if let Some(h) = Header::read(d, 7) {
                        // The shared socket finds the flow in the header;
                        // a per-flow socket already is the flow.
                        let f = if shared { h.flow as usize } else { i };
                        per_flow[f] += 1;
                        got += 1;
                    }
                }
                if let Some(d) = rx.drops {
                    drops[i] = d;
                }
            }
        }
    }
    let cpu = thread_cpu() - cpu0;
    let dropped: u64 = drops.iter().map(|&d| d as u64).sum::<u64>() - drop0;
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let idle = per_flow.iter().filter(|&&n| n == 0).count();
    println!(
        "{} {} {:.0} {:.3} {:.1} idle_flows={}",
        args[1],
        flows,
        got as f64 / secs,
        cpu.as_secs_f64() * 1e6 / got.max(1) as f64,
        100.0 * dropped as f64 / (dropped + got).max(1) as f64,
        idle
    );
}
