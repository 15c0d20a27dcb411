//! The kernel's view of a flow: TCP_INFO and the socket buffers it granted.
//! Linux doubles SO_RCVBUF/SO_SNDBUF requests and caps them at rmem_max /
//! wmem_max, so results always carry what was granted, not what was asked.

use crate::model::sample::TcpInfo;
use std::os::fd::RawFd;

/// `struct tcp_info` from linux/tcp.h up to `tcpi_rcv_wnd` (Linux 6.2).
/// Older kernels return a shorter struct; `read` reports which part is valid.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
    rcv_wnd: u32,
}

fn has(len: usize, end_of_field: usize) -> bool {
    len >= end_of_field
}

macro_rules! end_of {
    ($f:ident) => {
        std::mem::offset_of!(RawTcpInfo, $f) + std::mem::size_of_val(&RawTcpInfo::default().$f)
    };
}

/// Reads TCP_INFO of a connected TCP socket.
pub fn read(fd: RawFd) -> Option<TcpInfo> {
    let (raw, len) = read_raw(fd)?;
    Some(convert(&raw, len))
}

/// The kernel's struct as it filled it, and how many bytes it wrote.
fn read_raw(fd: RawFd) -> Option<(RawTcpInfo, usize)> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `raw`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut raw as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0).then_some((raw, len as usize))
}

/// Payload bytes the peer has received of what this socket sent: the
/// cumulatively acknowledged bytes plus the segments it acknowledged
/// selectively (SACK) times the MSS. Unlike the peer's reads, which wait
/// for a lost segment's retransmission (the data behind the hole sits in
/// the peer's out-of-order queue, up to a round trip and a queue of it),
/// this counts a byte when it arrived. None when the kernel does not say
/// (no `tcpi_bytes_acked`, Linux < 4.1) or the socket is gone.
pub fn delivered(fd: RawFd) -> Option<u64> {
    let (raw, len) = read_raw(fd)?;
    has(len, end_of!(bytes_acked)).then(|| delivered_of(&raw))
}

fn delivered_of(raw: &RawTcpInfo) -> u64 {
    raw.bytes_acked
        .saturating_add(u64::from(raw.sacked) * u64::from(raw.snd_mss))
}

/// TCP_INFO as another process's socket reports it through sock_diag
/// (INET_DIAG_INFO): the same struct, possibly shorter or longer.
pub fn from_bytes(b: &[u8]) -> Option<TcpInfo> {
    if b.len() < std::mem::offset_of!(RawTcpInfo, rcv_space) {
        return None;
    }
    let mut raw = RawTcpInfo::default();
    let n = b.len().min(std::mem::size_of::<RawTcpInfo>());
    // SAFETY: copies at most size_of::<RawTcpInfo>() bytes into a plain
    // repr(C) struct of integers, for which any bit pattern is valid.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), &mut raw as *mut RawTcpInfo as *mut u8, n);
    }
    Some(convert(&raw, n))
}

fn convert(raw: &RawTcpInfo, len: usize) -> TcpInfo {
    let opt64 = |ok: bool, v: u64| ok.then_some(v);
    let opt32 = |ok: bool, v: u32| ok.then_some(v);
    TcpInfo {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        min_rtt_us: opt32(has(len, end_of!(min_rtt)), raw.min_rtt),
        snd_cwnd: raw.snd_cwnd,
        snd_ssthresh: raw.snd_ssthresh,
        snd_mss: raw.snd_mss,
        rcv_mss: raw.rcv_mss,
        pmtu: raw.pmtu,
        total_retrans: raw.total_retrans,
        bytes_retrans: opt64(has(len, end_of!(bytes_retrans)), raw.bytes_retrans),
        delivery_rate_bps: opt64(
            has(len, end_of!(delivery_rate)),
            raw.delivery_rate.saturating_mul(8),
        ),
        pacing_rate_bps: opt64(
            has(len, end_of!(pacing_rate)),
            raw.pacing_rate.saturating_mul(8),
        ),
        bytes_acked: opt64(has(len, end_of!(bytes_acked)), raw.bytes_acked),
        bytes_received: opt64(has(len, end_of!(bytes_received)), raw.bytes_received),
        data_segs_out: opt32(has(len, end_of!(data_segs_out)), raw.data_segs_out),
        data_segs_in: opt32(has(len, end_of!(data_segs_in)), raw.data_segs_in),
        snd_wnd: opt32(has(len, end_of!(snd_wnd)), raw.snd_wnd),
        rcv_wnd: opt32(has(len, end_of!(rcv_wnd)), raw.rcv_wnd),
        snd_wscale: raw.wscale & 0x0f,
        rcv_wscale: raw.wscale >> 4,
        rwnd_limited_us: opt64(has(len, end_of!(rwnd_limited)), raw.rwnd_limited),
        sndbuf_limited_us: opt64(has(len, end_of!(sndbuf_limited)), raw.sndbuf_limited),
    }
}

pub fn getsockopt_int(fd: RawFd, level: i32, opt: i32) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized option into an int.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0).then_some(v)
}

/// Socket buffer sizes the kernel granted (after doubling and capping).
pub fn granted_buffers(fd: RawFd) -> (Option<u32>, Option<u32>) {
    (
        getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).map(|v| v as u32),
        getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).map(|v| v as u32),
    )
}

/// The congestion control a socket actually uses.
pub fn congestion_control(fd: RawFd) -> Option<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes a NUL-padded name of at most 16 bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(len as usize);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn delivered_counts_selectively_acknowledged_segments() {
        let raw = RawTcpInfo {
            bytes_acked: 1_000_000,
            sacked: 10,
            snd_mss: 1448,
            ..RawTcpInfo::default()
        };
        assert_eq!(delivered_of(&raw), 1_014_480);
    }

    #[test]
    fn reads_a_live_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 100_000]).unwrap();
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).unwrap();
        let ci = read(c.as_raw_fd()).unwrap();
        let si = read(s.as_raw_fd()).unwrap();
        assert!(ci.snd_mss > 1000, "mss {}", ci.snd_mss);
        assert!(ci.snd_cwnd >= 1);
        assert!(ci.bytes_acked.unwrap_or(100_001) >= 100_000);
        assert_eq!(si.bytes_received, Some(100_000));
        // Everything was acknowledged (nothing is held selectively).
        assert!(delivered(c.as_raw_fd()).unwrap() >= 100_000);
        assert_eq!(delivered(s.as_raw_fd()), Some(0));
        let (snd, rcv) = granted_buffers(c.as_raw_fd());
        assert!(snd.unwrap() > 0 && rcv.unwrap() > 0);
        assert!(congestion_control(c.as_raw_fd()).is_some_and(|s| !s.is_empty()));
    }
}
