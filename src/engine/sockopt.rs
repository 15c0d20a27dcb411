//! Socket options applied to every data socket on both ends, from the spec.

use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use crate::model::spec::TestSpec;

/// Options that must be set before connect/listen (buffers decide the window
/// scale, TCP_MAXSEG the SYN's MSS), and those that can follow. `receives`:
/// this end takes payload (its workload says which ends do).
pub fn apply(sock: &SockRef<'_>, spec: &TestSpec, receives: bool) -> io::Result<()> {
    if let Some(b) = spec.sndbuf {
        sock.set_send_buffer_size(b)?;
    }
    // An exact window is the receiver's: a sender that also sets SO_RCVBUF
    // (hence a small window scale) makes this kernel raise the receiver's
    // clamp back to 1.5x (measured: 60 instead of 40 Mbit/s at 256 KB, 50 ms).
    let exact = spec.window == crate::model::spec::WindowMode::Exact;
    if let Some(b) = spec.rcvbuf.filter(|_| !exact || receives) {
        sock.set_recv_buffer_size(b)?;
    }
    if spec.nodelay {
        sock.set_tcp_nodelay(true)?;
    }
    if let Some(cc) = &spec.cc {
        set_congestion(sock.as_raw_fd(), cc)?;
    }
    if let Some(mss) = spec.mss {
        sock.set_tcp_mss(mss)?;
    }
    if spec.spin {
        // Busy-poll the device queue for up to 50 µs in reads and polls
        // where the kernel lets us (above net.core.busy_read it needs
        // CAP_NET_ADMIN); the worker spins in epoll either way.
        let _ = set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_BUSY_POLL, 50);
    }
    Ok(())
}

/// Sets an int socket option.
pub fn set_int(fd: i32, level: i32, name: i32, v: libc::c_int) -> io::Result<()> {
    // SAFETY: an int option of the right size on a socket the caller owns.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub fn set_congestion(fd: i32, cc: &str) -> io::Result<()> {
    // SAFETY: passes a byte string and its length.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const libc::c_void,
            cc.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "congestion control '{cc}' refused ({e}); this kernel offers: {}",
                avail.trim()
            ),
        ));
    }
    Ok(())
}

/// With `--window exact`, clamps the window of a connected data socket to
/// `rcvbuf`: SO_RCVBUF alone lets Linux advertise about 1.5x the value, and
/// a clamp on the listener alone is undone by autotuning.
pub fn clamp_window(fd: i32, spec: &TestSpec, receives: bool) -> io::Result<()> {
    match exact_window(spec, receives) {
        Some(w) => set_window_clamp(fd, w),
        None => Ok(()),
    }
}

/// The window this end must hold with `--window exact` (None: not asked,
/// or this end only sends: `receives` false).
pub fn exact_window(spec: &TestSpec, receives: bool) -> Option<u32> {
    match (spec.window, spec.rcvbuf, receives) {
        (crate::model::spec::WindowMode::Exact, Some(w), true) => {
            Some(w.min(i32::MAX as usize) as u32)
        }
        _ => None,
    }
}

pub fn window_clamp(fd: i32) -> Option<u32> {
    crate::measure::tcpinfo::getsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP)
        .map(|v| v as u32)
}

pub fn set_window_clamp(fd: i32, w: u32) -> io::Result<()> {
    let v = w.min(i32::MAX as u32) as libc::c_int;
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, v)
}

/// A non-blocking TCP socket for `addr`'s family with the spec's options.
/// Non-blocking and close-on-exec are flags of socket(2) itself, not three
/// more syscalls: crr opens one socket per transaction.
pub fn tcp_socket(addr: &SocketAddr, spec: &TestSpec, receives: bool) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    apply(&SockRef::from(&s), spec, receives)?;
    Ok(s)
}

/// A blocking TCP socket whose reads and writes (and connect) give up
/// after `tick` (`--io threads`).
pub fn tcp_socket_blocking(
    addr: &SocketAddr,
    spec: &TestSpec,
    receives: bool,
    tick: std::time::Duration,
) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM.cloexec(),
        Some(Protocol::TCP),
    )?;
    apply(&SockRef::from(&s), spec, receives)?;
    s.set_read_timeout(Some(tick))?;
    s.set_write_timeout(Some(tick))?;
    Ok(s)
}

/// A listening data socket. With `reuse_port`, several workers may each bind
/// one on the same port and the kernel spreads connections among them.
pub fn listener(
    addr: &SocketAddr,
    spec: &TestSpec,
    reuse_port: bool,
    receives: bool,
) -> io::Result<Socket> {
    let s = tcp_socket(addr, spec, receives)?;
    s.set_reuse_address(true)?;
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&(*addr).into())?;
    s.listen(4096)?;
    Ok(s)
}

/// Ends the connection with a reset when dropped (SO_LINGER 0).
pub fn set_reset_on_close(fd: i32) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a linger struct of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
