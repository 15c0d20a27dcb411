//! The IETF responsiveness test ("Responsiveness under Working
//! Conditions", draft-ietf-ippm-responsiveness: RPM, round trips per
//! minute), as Apple's `networkQuality` and goresponsiveness run it.
//!
//! Its client (`linerate run rpm`, `client`, with the draft's arithmetic in
//! `method`) and its server (`linerate serve --rpm`): the
//! configuration at `/.well-known/nq` and the three objects the draft
//! asks for, a small download, an endless large download and an upload
//! sink, over HTTP/2 with TLS (or clear, for hosts without TLS), so that
//! any RPM client can test against a linerate agent.

pub mod charts;
pub mod client;
pub mod fleet;
pub mod keypoints;
pub mod kind;
pub mod local;
pub mod method;
pub mod metrics;
pub mod options;
pub mod pace;
pub mod params;
pub mod server;

/// Unsent bytes a connection's socket holds before it says "full"
/// (TCP_NOTSENT_LOWAT), and what HTTP/2 buffers per stream above it, on
/// both ends. A request asked on a loaded connection (the test's self
/// probes) waits behind what is already queued to send: left to the
/// defaults, megabytes of the large object, seconds at 100 Mbit/s, which a
/// client would read as the network's delay. 16 KiB is what HTTP/2
/// servers are tuned to for their streams' priorities (Cloudflare's nginx
/// guidance; the draft's next revision asks both ends for a small
/// TCP_NOTSENT_LOWAT); the window in flight is not limited by it. A 16 KiB
/// HTTP/2 buffer measured the same as 64 KiB through fq_codel.
const NOTSENT_LOWAT: i32 = 16 * 1024;
const STREAM_SEND_BUFFER: usize = 64 * 1024;

/// Sets an RPM connection's socket as both ends want it: no Nagle, and
/// little unsent data held (`NOTSENT_LOWAT`).
fn tune(tcp: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let _ = tcp.set_nodelay(true);
    let _ = crate::engine::sockopt::set_int(
        tcp.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        NOTSENT_LOWAT,
    );
}
