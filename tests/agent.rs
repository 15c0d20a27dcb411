//! The agent and the control protocol, with real processes: authentication,
//! version mismatch on both sides, an agent killed mid-test, a controller
//! that vanishes, the busy cap, and bad input.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn frame(v: serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(&v).unwrap();
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&body);
    f
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<serde_json::Value> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body).unwrap())
}

#[test]
fn remote_agent_with_token_file() {
    let agent = Agent::start("s3cret", &[]);
    let tf = token_file("good", "s3cret");
    let out = tmp("remote.json");
    let args = [
        "rr",
        "-d",
        "1",
        "--warmup",
        "0.2",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ];
    let o = run(&remote(&agent.addr, &tf, &args), LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&out);
    assert_eq!(r["agent"]["local"], false);
    assert!(u(&r["summary"]["transactions"]) > 100);
    assert!(!r["environment"]["agent"]["kernel"]
        .as_str()
        .unwrap()
        .is_empty());
    // The same agent serves the next controller too.
    let o = run(
        &remote(
            &agent.addr,
            &tf,
            &["crr", "-d", "0.5", "--warmup", "0.1", "-q"],
        ),
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn wrong_token_is_refused_on_both_sides() {
    let agent = Agent::start("right", &[]);
    let tf = token_file("wrong", "wrong");
    let o = run(
        &remote(&agent.addr, &tf, &["stream", "-d", "1", "-q"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    assert_no_panic(&o);
    let e = stderr(&o);
    assert!(e.contains("wrong token"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    std::thread::sleep(Duration::from_millis(300)); // the agent logs after answering
    let log = agent.log();
    assert!(log.contains("authentication failed"), "agent log: {log}");
}

#[test]
fn the_token_never_crosses_the_wire() {
    let agent = Agent::start("do-not-leak-this-token", &[]);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    let hello = read_frame(&mut s).unwrap();
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["protocol"], "linerate-control");
    assert!(!hello.to_string().contains("do-not-leak"));
    // A made-up MAC is refused.
    let auth = serde_json::json!({"type": "auth", "version": hello["version"], "nonce": "00", "mac": "ff"});
    s.write_all(&frame(auth)).unwrap();
    let reply = read_frame(&mut s).unwrap();
    assert_eq!(reply["type"], "error");
    assert_eq!(reply["code"], "auth_failed");
}

#[test]
fn version_mismatch_is_named_on_the_agent_side() {
    let agent = Agent::start("t", &[]);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    let _hello = read_frame(&mut s).unwrap();
    let auth = serde_json::json!({"type": "auth", "version": 999, "nonce": "00", "mac": "00"});
    s.write_all(&frame(auth)).unwrap();
    let reply = read_frame(&mut s).unwrap();
    assert_eq!(reply["code"], "version_mismatch");
    assert!(
        reply["message"].as_str().unwrap().contains("v999"),
        "{reply}"
    );
    // The agent logs, then closes: wait for the close before reading its log.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let log = agent.log();
    assert!(log.contains("version mismatch"), "agent log: {log}");
}

#[test]
fn version_mismatch_is_named_on_the_controller_side() {
    // A fake agent from the future: it greets with protocol version 999.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let hello = serde_json::json!({"type": "hello", "protocol": "linerate-control", "version": 999, "software": "linerate 9", "nonce": "ab"});
        s.write_all(&frame(hello)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        read_frame(&mut s).ok()
    });
    let tf = token_file("vm", "t");
    let o = run(&remote(&addr, &tf, &["stream", "-q"]), LIMIT);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("version mismatch") && e.contains("v999"), "{e}");
    let told = fake
        .join()
        .unwrap()
        .expect("the controller tells the agent why it leaves");
    assert_eq!(told["code"], "version_mismatch");
}

#[test]
fn agent_killed_mid_test_keeps_partial_results() {
    let mut agent = Agent::start("k", &[]);
    let tf = token_file("kill", "k");
    let out = tmp("killed.json");
    let args = [
        "stream",
        "-d",
        "8",
        "--warmup",
        "0.5",
        "--interval",
        "0.5",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ];
    let ctl = spawn(&remote(&agent.addr, &tf, &args));
    std::thread::sleep(Duration::from_millis(2500));
    agent.kill();
    // The controller must notice and end by itself, well before its window would.
    let o = wait(ctl, Duration::from_secs(20));
    assert_eq!(
        o.status.code(),
        Some(3),
        "partial results exit 3; stderr {}",
        stderr(&o)
    );
    assert_no_panic(&o);
    let e = stderr(&o);
    assert!(e.contains("died mid-test"), "{e}");
    let r = json(&out);
    assert_eq!(r["summary"]["status"], "partial");
    let it = &r["iterations"][0];
    assert_eq!(it["status"], "partial");
    let ivs = it["intervals"].as_array().unwrap();
    assert!(
        ivs.len() >= 2,
        "intervals measured before the agent died are kept: {}",
        ivs.len()
    );
    assert!(ivs.len() < 16);
    assert!(u(&it["bytes"]) > 0);
}

#[test]
fn agent_survives_a_vanished_controller_and_caps_tests() {
    let agent = Agent::start("v", &["--max-tests", "1"]);
    let tf = token_file("vanish", "v");
    let pid = agent.child.id();
    // What the agent holds idle, once a first test has come and gone.
    let o = run(
        &remote(
            &agent.addr,
            &tf,
            &["rr", "-d", "0.3", "--warmup", "0", "-q"],
        ),
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    std::thread::sleep(Duration::from_millis(300));
    let idle = (fds(pid), threads(pid));
    let mut ctl = spawn(&remote(
        &agent.addr,
        &tf,
        &["stream", "-F", "8", "-d", "20", "--warmup", "0", "-q"],
    ));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(fds(pid) >= idle.0 + 8, "the test's flows are open");
    // While that test runs, a second controller is told at once that the
    // agent is busy.
    let t = Instant::now();
    let o = run(&remote(&agent.addr, &tf, &["rr", "-d", "1", "-q"]), LIMIT);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "busy took {:?}",
        t.elapsed()
    );
    // The first controller vanishes mid-test (SIGKILL: no goodbye): within
    // 5 s the agent holds no more descriptors or threads than idle.
    ctl.kill().unwrap();
    ctl.wait().unwrap();
    let t = Instant::now();
    while (fds(pid), threads(pid)) != idle {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "after 5 s the agent still holds {} fds and {} threads (idle: {idle:?})",
            fds(pid),
            threads(pid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The agent cleans up and serves the next controller.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let o = run(
            &remote(
                &agent.addr,
                &tf,
                &["rr", "-d", "0.5", "--warmup", "0.1", "-q"],
            ),
            LIMIT,
        );
        if o.status.success() {
            break;
        }
        assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
        assert!(
            Instant::now() < deadline,
            "agent never freed the slot of the vanished controller"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(300));
    let log = agent.log();
    assert!(log.contains("left"), "agent log: {log}");
}

#[test]
fn agent_caps_flows_and_duration() {
    let agent = Agent::start("c", &["--max-flows", "4", "--max-duration", "5s"]);
    let tf = token_file("caps", "c");
    let o = run(
        &remote(&agent.addr, &tf, &["stream", "-F", "5", "-q"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("allows 4"), "{}", stderr(&o));
    let o = run(
        &remote(&agent.addr, &tf, &["stream", "-d", "10", "-q"]),
        LIMIT,
    );
    assert_eq!(o.status.code(), Some(1));
    // The warm-up counts against the cap, and the refusal says so: a user
    // asking for exactly the cap otherwise cannot see why it is refused.
    assert!(
        stderr(&o).contains("12 s asked (10 s + 2 s warm-up), this agent allows 5 s"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--max-duration"), "{}", stderr(&o));
}

#[test]
fn an_agent_setup_failure_reaches_the_controller_at_once() {
    // The agent cannot open its crr listeners with an unknown congestion
    // control; the controller must hear why at once, not time out (30 s).
    let o = run_str(
        "run crr --cc nosuchcc -d 0.3 --warmup 0.1",
        Duration::from_secs(10),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("congestion control 'nosuchcc' refused"),
        "{}",
        stderr(&o)
    );
    assert_no_panic(&o);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for args in [
        vec!["run", "bogus"],
        vec!["run", "stream", "--flows", "0"],
        vec!["run", "stream", "--message", "12Q"],
        vec!["run", "stream", "--duration", "ten"],
        vec!["run", "rr", "--iterations", "5..2"],
        vec!["run", "stream", "--cpus", "999"],
        vec!["run", "crr", "--rate", "100"],
        vec!["nonsense"],
    ] {
        let o = run(&args, LIMIT);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_no_panic(&o);
        assert!(!stderr(&o).trim().is_empty());
    }
    let missing = std::path::Path::new("/nonexistent/token");
    let o = run(&remote("127.0.0.1:1", missing, &["stream"]), LIMIT);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read token file"));
    let tf = token_file("unreach", "x");
    let o = run(&remote("127.0.0.1:1", &tf, &["stream"]), LIMIT);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot reach agent"), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim().lines().count(), 1);
    // No token at all: the controller tries without one.
    let o = run(&["run", "stream", "--agent", "127.0.0.1:1"], LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot reach agent"), "{}", stderr(&o));
}

/// `serve` without a token: on loopback it serves anyone (as netserver and
/// `iperf3 -s` do), elsewhere only with --insecure-no-token; a controller
/// holding a token refuses such an agent, and an agent with a token tells
/// a controller without one what it needs.
#[test]
fn serving_without_a_token() {
    let o = std::process::Command::new(bin())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("LINERATE_TOKEN")
        .output()
        .unwrap();
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("no token") && e.contains("--insecure-no-token") && e.contains("loopback"),
        "{e}"
    );

    let open = Agent::start("", &[]);
    let args = ["rr", "-d", "0.5", "--warmup", "0.1", "-q"];
    let mut cmd = vec!["run"];
    cmd.extend(args);
    cmd.extend(["--agent", &open.addr]);
    let o = run(&cmd, LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    // The companion (the other crypto setting) holds no token either.
    let mut tls = cmd.clone();
    tls.extend(["--tls", "--crypto-hw", "off"]);
    let o = run(&tls, LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    // A controller with a token wants the agent to prove it.
    let tf = token_file("notoken", "s3cret");
    let o = run(&remote(&open.addr, &tf, &args), LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("runs without a token"),
        "{}",
        stderr(&o)
    );
    let log = open.log();
    assert!(log.contains("no token: any controller"), "{log}");

    // And the other way round.
    let tokened = Agent::start("s3cret", &[]);
    let mut cmd = vec!["run"];
    cmd.extend(args);
    cmd.extend(["--agent", &tokened.addr]);
    let o = run(&cmd, LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs a token"), "{}", stderr(&o));

    // --insecure-no-token on every address: in a network namespace of its
    // own, so nothing outside can reach it (root only).
    if unsafe { libc::geteuid() } == 0 {
        let a = Agent::start_with(
            &["unshare", "-n"],
            "0.0.0.0:0",
            "",
            &["--insecure-no-token"],
        );
        assert!(a.addr.starts_with("0.0.0.0:"), "{}", a.addr);
        let log = a.log();
        assert!(
            log.contains("no token: any controller that reaches 0.0.0.0:"),
            "{log}"
        );
    }
}

#[test]
fn too_few_file_descriptors_is_one_line_naming_ulimit() {
    // A hard limit of 256 cannot be raised: 1,000 flows must be refused
    // before any connect, with the fix named, not EMFILE at flow 190.
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 256 && exec {} run stream -F 1000 -d 1 --warmup 0 -q",
            bin()
        ))
        .output()
        .unwrap();
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("ulimit -n") && e.contains("may open 256"), "{e}");
}

/// Open descriptors of process `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Threads of process `pid`.
fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `serve --data-port`: a test's data connections arrive on that port (ss
/// shows the agent listening there while it runs); a second server test
/// while the first holds it is told so at once; once the first is over
/// the port is free for the next.
#[test]
fn a_fixed_data_port_serves_one_test_at_a_time() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port().to_string();
    drop(free);
    let agent = Agent::start("d", &["--data-port", &port, "--no-crypto-twin"]);
    let tf = token_file("dataport", "d");
    let first = spawn(&remote(
        &agent.addr,
        &tf,
        &["crr", "-F", "2", "-d", "3", "--warmup", "0", "-q"],
    ));
    std::thread::sleep(Duration::from_millis(1500));
    let ss = Command::new("ss").args(["-Htln"]).output().unwrap();
    assert!(
        stdout(&ss).contains(&format!("127.0.0.1:{port} ")),
        "nothing listens on the data port {port}: {}",
        stdout(&ss)
    );
    let o = run(&remote(&agent.addr, &tf, &["rr", "-d", "1", "-q"]), LIMIT);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("another test holds data port {port}")),
        "{}",
        stderr(&o)
    );
    let o = wait(first, LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    for kind in ["stream", "udp-stream"] {
        let o = run(
            &remote(
                &agent.addr,
                &tf,
                &[kind, "-d", "0.5", "--warmup", "0", "-q"],
            ),
            LIMIT,
        );
        assert!(o.status.success(), "{kind} after: {}", stderr(&o));
    }
}
