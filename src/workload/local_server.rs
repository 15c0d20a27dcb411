//! A server that a kind running in this process starts for its test (rpm's
//! RPM server, http's object server): bound on loopback or at the lab's
//! server address inside the lab's server namespace, served from a thread
//! of its own, stopped and joined when the test drops it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::kind::Place;

/// A server started for one test; dropping it stops it and waits.
pub struct LocalServer {
    /// Where it listens, as the client reaches it.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds a non-blocking listener where `place` says (the lab's server
/// address in its namespace, or loopback: `[::1]` with `ipv6`) in a thread
/// named `name`, then runs `serve` there until the stop flag it is given
/// is set. `serve` returns what stopped it; an error is printed, as the
/// test goes on without it and fails on its own terms.
pub fn start<F>(place: &Place, ipv6: bool, name: &str, serve: F) -> Result<LocalServer, String>
where
    F: FnOnce(std::net::TcpListener, &AtomicBool) -> std::io::Result<()> + Send + 'static,
{
    let addr: SocketAddr = match &place.server {
        Some((ip, _)) => SocketAddr::new(*ip, 0),
        None if ipv6 => "[::1]:0".parse().expect("a loopback address"),
        None => "127.0.0.1:0".parse().expect("a loopback address"),
    };
    let ns = place.server.as_ref().map(|(_, ns)| ns.clone());
    let enter = place.enter;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let what = name.to_string();
    let (tx, rx) = std::sync::mpsc::channel::<Result<SocketAddr, String>>();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // hyper writes with writev, which has no MSG_NOSIGNAL: a client
            // gone mid-write would raise SIGPIPE in this thread.
            crate::engine::signals::block_in_this_thread();
            let bound = match (&ns, enter) {
                (Some(ns), Some(enter)) => {
                    enter(ns).map_err(|e| format!("the lab's server namespace: {e}"))
                }
                _ => Ok(()),
            }
            .and_then(|()| {
                let l = std::net::TcpListener::bind(addr).map_err(|e| format!("{addr}: {e}"))?;
                l.set_nonblocking(true)
                    .map_err(|e| format!("{addr}: {e}"))?;
                let at = l.local_addr().map_err(|e| format!("{addr}: {e}"))?;
                Ok((l, at))
            });
            match bound {
                Ok((listener, at)) => {
                    let _ = tx.send(Ok(at));
                    if let Err(e) = serve(listener, &flag) {
                        eprintln!("linerate: the local {what} server stopped: {e}");
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let mut server = LocalServer {
        addr,
        stop,
        thread: Some(thread),
    };
    match rx.recv() {
        Ok(Ok(at)) => {
            server.addr = at;
            Ok(server)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err("its thread ended before it listened".into()),
    }
}
