//! The control channel under attack: a man-in-the-middle proxy on
//! loopback, between a controller and a real agent, that changes one bit of
//! a message, replays one, drops one or cuts one short. Each must be caught
//! by the side that receives it, named on both sides, and a tampered test
//! request must never start traffic.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// What the proxy does to the stream of frames in one direction.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Flip one bit inside the first frame whose message has this type.
    Flip(&'static str),
    /// Send the first frame of this type twice.
    Replay(&'static str),
    /// Leave out the n-th (0-based) frame of this type.
    Drop(&'static str, usize),
    /// Send half of the n-th frame of this type, then close.
    Cut(&'static str, usize),
}

/// Which way the fault applies.
#[derive(Clone, Copy, PartialEq)]
enum Dir {
    ToAgent,
    ToController,
}

/// The message type of a frame's body: sealed frames carry 40 bytes of
/// sequence number and tag before their JSON, handshake frames none.
fn kind(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    text.split("\"type\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("")
        .to_string()
}

fn read_frame(s: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some((len.to_vec(), body))
}

/// Copies frames from `from` to `to`, applying `fault` if given.
fn pump(mut from: TcpStream, mut to: TcpStream, fault: Option<Fault>) {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut done = false;
    while let Some((len, mut body)) = read_frame(&mut from) {
        let k = kind(&body);
        let n = *seen.entry(k.clone()).and_modify(|c| *c += 1).or_insert(0);
        let mut frame = len.clone();
        match fault {
            Some(Fault::Flip(t)) if !done && k == t => {
                // A bit in the JSON, after the seal's 40 bytes.
                let at = 40 + (body.len() - 40) / 2;
                body[at] ^= 0x01;
                done = true;
                frame.extend_from_slice(&body);
            }
            Some(Fault::Replay(t)) if !done && k == t => {
                frame.extend_from_slice(&body);
                frame.extend_from_slice(&len);
                frame.extend_from_slice(&body);
                done = true;
            }
            Some(Fault::Drop(t, i)) if k == t && n == i => continue,
            Some(Fault::Cut(t, i)) if k == t && n == i => {
                frame.extend_from_slice(&body[..body.len() / 2]);
                let _ = to.write_all(&frame);
                break;
            }
            _ => frame.extend_from_slice(&body),
        }
        if to.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// A proxy on 127.0.0.1 in front of `agent`, for one controller; returns
/// its address.
fn proxy(agent: &str, dir: Dir, fault: Fault) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let agent = agent.to_string();
    std::thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let a = TcpStream::connect(&agent).unwrap();
        let (c2, a2) = (c.try_clone().unwrap(), a.try_clone().unwrap());
        let (to_agent, to_ctl) = match dir {
            Dir::ToAgent => (Some(fault), None),
            Dir::ToController => (None, Some(fault)),
        };
        let t = std::thread::spawn(move || pump(c, a, to_agent));
        pump(a2, c2, to_ctl);
        let _ = t.join();
    });
    addr
}

/// Runs an rr test through a proxy with `fault`; returns the controller's
/// stderr and exit code, and the agent's log.
fn through(dir: Dir, fault: Fault, extra: &[&str]) -> (String, Option<i32>, String) {
    let token = "mitm-token";
    let agent = Agent::start(token, &[]);
    let tf = token_file("mitm", token);
    let via = proxy(&agent.addr, dir, fault);
    let mut args = vec!["rr", "-d", "1", "--warmup", "0.1", "--interval", "0.1"];
    args.extend_from_slice(extra);
    let o = run(&remote(&via, &tf, &args), LIMIT);
    assert_no_panic(&o);
    // The agent has had its say by the time the controller exits.
    std::thread::sleep(Duration::from_millis(300));
    (stderr(&o), o.status.code(), agent.log())
}

#[test]
fn a_flipped_bit_in_the_test_request_is_caught_and_starts_nothing() {
    let (err, code, log) = through(Dir::ToAgent, Fault::Flip("setup"), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("control message 0 from the controller failed its authentication tag"),
        "controller: {err}"
    );
    assert!(
        err.lines().filter(|l| !l.trim().is_empty()).count() <= 2,
        "{err}"
    );
    assert!(
        log.contains(
            "closing: control message 0 from the controller failed its authentication tag"
        ),
        "agent: {log}"
    );
    // The request was never acted on: no test was set up.
    assert!(!log.contains("setting up"), "agent: {log}");
}

#[test]
fn a_replayed_test_request_is_caught() {
    let (err, code, log) = through(Dir::ToAgent, Fault::Replay("setup"), &[]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("arrived again"), "controller: {err}");
    assert!(log.contains("arrived again"), "agent: {log}");
    // Once only: the replayed copy did not set up a second test.
    assert_eq!(log.matches("setting up").count(), 1, "agent: {log}");
}

#[test]
fn a_dropped_message_is_caught() {
    // The agent's third interval report vanishes; the fourth gives it away.
    let (err, code, log) = through(Dir::ToController, Fault::Drop("interval", 2), &[]);
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("message 5 from the agent never arrived"),
        "controller: {err}"
    );
    assert!(err.contains("dropped in transit"), "controller: {err}");
    assert!(log.contains("never arrived"), "agent: {log}");
}

#[test]
fn a_message_cut_short_is_caught() {
    let (err, code, _) = through(Dir::ToController, Fault::Cut("interval", 1), &[]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("was cut short"), "controller: {err}");
}

#[test]
fn an_untampered_proxy_changes_nothing() {
    // The proxy itself is transparent: the same test through it passes.
    let (err, code, log) = through(Dir::ToAgent, Fault::Flip("no-such-message"), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(log.contains("setting up"), "agent: {log}");
}

/// Connects and reads the agent's hello frame.
fn greeted(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    read_frame(&mut s).expect("hello");
    s
}

/// Reads until the agent closes `s` (end of file or reset), at most until
/// `by`: the time it closed, or None if it was still open then. Frames it
/// sends before (a refusal) are returned too.
fn closed_by(s: &mut TcpStream, by: Instant) -> (Option<Instant>, String) {
    let mut said = Vec::new();
    loop {
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (None, String::from_utf8_lossy(&said).into_owned());
        }
        s.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(0) => {
                return (
                    Some(Instant::now()),
                    String::from_utf8_lossy(&said).into_owned(),
                )
            }
            Ok(n) => said.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                return (
                    Some(Instant::now()),
                    String::from_utf8_lossy(&said).into_owned(),
                )
            }
        }
    }
}

/// How long a short test against `agent` takes from start to exit.
fn served_in(agent: &Agent, tf: &std::path::Path) -> Duration {
    let t0 = Instant::now();
    let o = run(
        &remote(&agent.addr, tf, &["rr", "-d", "0.3", "--warmup", "0.1"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    t0.elapsed()
}

#[test]
fn silent_and_trickling_connections_are_cut_at_their_deadlines() {
    let token = "slow-token";
    let agent = Agent::start(token, &[]);
    // Silent after the hello: cut after 2 s (a controller answers at once).
    let mut silent = greeted(&agent.addr);
    let t0 = Instant::now();
    let (closed, _) = closed_by(&mut silent, t0 + Duration::from_secs(6));
    let after = closed.expect("a silent connection was never closed") - t0;
    assert!(
        after >= Duration::from_millis(1800) && after < Duration::from_millis(3500),
        "silent connection closed after {after:?}"
    );
    // Slowloris: a frame trickled a byte at a time never finishes; the
    // agent ends it at its handshake deadline (5 s), not per byte.
    let mut slow = greeted(&agent.addr);
    let t0 = Instant::now();
    let mut closed_after = None;
    let trickle = [0u8, 0, 0, 200];
    for i in 0..30 {
        let byte = [trickle.get(i).copied().unwrap_or(b' ')];
        if slow.write_all(&byte).is_err() {
            closed_after = Some(t0.elapsed());
            break;
        }
        let mut buf = [0u8; 64];
        slow.set_read_timeout(Some(Duration::from_millis(700)))
            .unwrap();
        match slow.read(&mut buf) {
            Ok(0) => {
                closed_after = Some(t0.elapsed());
                break;
            }
            Ok(_) => {}
            Err(_) => {}
        }
    }
    let after = closed_after.expect("the trickling connection was never closed");
    assert!(
        after >= Duration::from_millis(4500) && after < Duration::from_secs(9),
        "closed after {after:?}"
    );
    let log = agent.log();
    assert!(log.contains("sent nothing within 2 s"), "{log}");
    assert!(log.contains("did not authenticate within 5 s"), "{log}");
}

#[test]
fn idle_connections_cannot_lock_a_controller_out() {
    let token = "idle-flood-token";
    let agent = Agent::start(token, &[]);
    let tf = token_file("idle-flood", token);
    let alone = served_in(&agent, &tf);
    // 300 connections that never send a byte (nor read): they wait in the
    // lobby without a thread (past 256 the oldest goes) and are cut after
    // 2 s, each told why.
    let opened = Instant::now();
    let mut idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&agent.addr).unwrap())
        .collect();
    let flooded = served_in(&agent, &tf);
    eprintln!(
        "a 0.4 s test from start to exit: alone {alone:?}, with 300 idle connections {flooded:?}"
    );
    assert!(
        flooded < alone + Duration::from_secs(2),
        "with 300 idle connections open the controller took {flooded:?} (alone {alone:?})"
    );
    // Every idle connection is closed by the agent within the 2 s
    // deadline (from when the last one opened, plus scheduling slack).
    let by = opened.max(Instant::now() - flooded) + Duration::from_secs(4);
    let (mut evicted, mut silent) = (0, 0);
    for (i, s) in idle.iter_mut().enumerate() {
        let (closed, said) = closed_by(s, by);
        assert!(
            closed.is_some(),
            "idle connection {i} still open after {:?}",
            opened.elapsed()
        );
        if said.contains("gave its place") {
            evicted += 1;
        }
        if said.contains("sent nothing within 2 s") {
            silent += 1;
        }
    }
    assert_eq!(
        evicted + silent,
        300,
        "each was told why: {evicted} evicted, {silent} silent"
    );
    assert!(evicted >= 40, "past 256 the oldest go: {evicted}");
    let log = agent.log();
    assert!(log.contains("closed without a thread"), "{log}");
}

#[test]
fn a_flood_of_tricklers_and_churn_cannot_lock_a_controller_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let token = "churn-flood-token";
    let agent = Agent::start(token, &[]);
    let tf = token_file("churn-flood", token);
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // 32 connections, each trickling a byte a second (re-opened when the
    // agent cuts them), for at most 30 s.
    for _ in 0..32 {
        let (stop, addr) = (stop.clone(), agent.addr.clone());
        threads.push(std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                let Ok(mut s) = TcpStream::connect(&addr) else {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                    if s.write_all(&[0]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
        }));
    }
    // 50 connections a second opened and dropped, for at most 30 s.
    {
        let (stop, addr) = (stop.clone(), agent.addr.clone());
        threads.push(std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::SeqCst) && Instant::now() < end {
                drop(TcpStream::connect(&addr));
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(3));
    let t = served_in(&agent, &tf);
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    eprintln!(
        "a 0.4 s test from start to exit under 32 tricklers and 50 new connections a second: {t:?}"
    );
    assert!(t < Duration::from_secs(15), "served after {t:?}");
}

/// Past the cap of 16 authenticating (connections that sent bytes), the
/// oldest is told it gave its place to a newer one, and the controller
/// gets in while the others are held.
#[test]
fn a_full_agent_evicts_the_oldest_and_says_busy_in_words() {
    let token = "cap-token";
    let agent = Agent::start(token, &[]);
    let tf = token_file("cap", token);
    // One byte of a frame's length: authenticating, never finishing.
    let speaking = || {
        let mut s = greeted(&agent.addr);
        s.write_all(&[0]).unwrap();
        // Let the lobby hand it to a session before the next one comes.
        std::thread::sleep(Duration::from_millis(30));
        s
    };
    let mut idle: Vec<TcpStream> = (0..16).map(|_| speaking()).collect();
    let _extra = speaking();
    let (closed, said) = closed_by(&mut idle[0], Instant::now() + Duration::from_secs(1));
    assert!(closed.is_some(), "the oldest was not evicted");
    assert!(
        said.contains("\"busy\"") && said.contains("gave its place"),
        "{said}"
    );
    let o = run(
        &remote(&agent.addr, &tf, &["rr", "-d", "0.3", "--warmup", "0.1"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    drop(idle);
    // A controller refused as busy (one test at a time, one running)
    // hears it in one line, in words.
    let agent = Agent::start(token, &["--max-tests", "1"]);
    let mut first = std::process::Command::new(bin())
        .args(remote(&agent.addr, &tf, &["rr", "-d", "3", "-q"]))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let o = run(
        &remote(&agent.addr, &tf, &["rr", "-d", "0.3", "--warmup", "0.1"]),
        LIMIT,
    );
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("the agent at {} is busy: ", agent.addr))
            && err.contains("try again"),
        "{err}"
    );
    assert!(
        !err.contains("Error {") && !err.contains("not a linerate agent"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(first.wait().unwrap().success());
}

#[test]
fn what_the_agent_starts_never_inherits_its_token() {
    use std::io::BufRead;
    let secret = "env-token-never-inherited-0123456789";
    let mut agent = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "-q"])
        .env("LINERATE_TOKEN", secret)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(agent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening"), "{line}");
    // Its companion (the other crypto setting) is its child.
    let pid = agent.id();
    let kids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')?
                        .1
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                })
                == Some(pid)
        })
        .collect();
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(!kids.is_empty(), "no companion started");
    for k in kids {
        let env = std::fs::read(format!("/proc/{k}/environ")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&env).contains(secret),
            "child {k} inherited the token"
        );
    }
}
