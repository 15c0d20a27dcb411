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

use crate::engine::flow::{Ctx, Flow, FlowBase, FlowReport, Io, ReadStep, Status, BUDGET};

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
    ) -> Self {
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
                    ReadStep::Data(_) => {}
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
}
