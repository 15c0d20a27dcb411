//! The control channel under attack: a man-in-the-middle proxy on
//! loopback, between a controller and a real agent, that changes one bit of
//! a message, replays one, drops one or cuts one short. Each must be caught
//! by the side that receives it, named on both sides, and a tampered test
//! request must never start traffic.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

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

#[test]
fn a_connection_that_never_authenticates_is_dropped_and_floods_are_capped() {
    let token = "slow-token";
    let agent = Agent::start(token, &[]);
    let tf = token_file("slow", token);
    // Slowloris: a frame trickled a byte at a time never finishes; the
    // agent ends it at its handshake deadline (10 s), not per byte.
    let mut slow = greeted(&agent.addr);
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let t0 = std::time::Instant::now();
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
        after >= Duration::from_secs(9) && after < Duration::from_secs(14),
        "closed after {after:?}"
    );

    // A flood of idle connections: past the cap, "busy" at once.
    let idle: Vec<TcpStream> = (0..16).map(|_| greeted(&agent.addr)).collect();
    let mut extra = TcpStream::connect(&agent.addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let (_, body) = read_frame(&mut extra).expect("an answer, not a hang");
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("busy") && text.contains("authenticating"),
        "{text}"
    );
    // Once they are gone, a real controller gets in.
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    let o = run(
        &remote(&agent.addr, &tf, &["rr", "-d", "0.3", "--warmup", "0.1"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let log = agent.log();
    assert!(log.contains("did not authenticate within 10 s"), "{log}");
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
