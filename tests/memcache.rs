//! memcache against a real memcached on loopback: started by the agent
//! (`--service`) or by the test (`--target`). Counts against memcached's own
//! stats, hit ratio after prefill and under evictions, corrupted values
//! detected, memcached killed mid-test, bad input.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);

fn kv(r: &serde_json::Value) -> &serde_json::Value {
    &r["iterations"][0]["kv"]
}

/// A memcached of the test's own on a free loopback port, killed (by PID)
/// when dropped.
struct Memcached {
    child: Child,
    port: u16,
}

impl Memcached {
    /// Started on a port that was free a moment before: another test may
    /// take it in between (memcached then exits, and whatever holds the
    /// port answers the connect), so the child must still run and answer
    /// `version` as memcached; else it is tried again on another port.
    fn start(extra: &[&str]) -> Memcached {
        for _ in 0..5 {
            if let Some(m) = Memcached::try_start(extra) {
                return m;
            }
        }
        panic!("memcached did not come up on any of 5 ports");
    }

    fn try_start(extra: &[&str]) -> Option<Memcached> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut args = vec![
            "-l".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-U".into(),
            "0".into(),
        ];
        if unsafe { libc_geteuid() } == 0 {
            args.extend(["-u".into(), "nobody".into()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new("memcached")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("memcached is installed (scripts/test.sh installs it)");
        let mut m = Memcached { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if !matches!(m.child.try_wait(), Ok(None)) {
                return None;
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut got = [0u8; 64];
                let ours = s.write_all(b"version\r\n").is_ok()
                    && s.read(&mut got)
                        .is_ok_and(|n| got[..n].starts_with(b"VERSION"));
                if ours && matches!(m.child.try_wait(), Ok(None)) {
                    return Some(m);
                }
                return None;
            }
            assert!(Instant::now() < deadline, "memcached did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// One command, the reply up to its terminator.
    fn ask(&self, cmd: &str, end: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(cmd.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !String::from_utf8_lossy(&got).ends_with(end) {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "memcached closed");
            got.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&got).into_owned()
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn d(x: &serde_json::Value, name: &str) -> u64 {
    x["server"]["delta"][name].as_i64().unwrap_or(-1).max(0) as u64
}

#[test]
fn counts_agree_with_memcacheds_own_stats() {
    // The agent starts memcached; its stats are read at the agent's window
    // edges, the client counts over its own window: they differ by the
    // requests in flight at the edges and the control message between the
    // two windows' starts.
    let out = tmp("kv-stats.json");
    let args = "run memcache --service memcached --flows 4 --outstanding 2 --keys 2000 --values 100-300 -d 2 --warmup 0.5 -q --json";
    let mut all: Vec<&str> = args.split(' ').collect();
    all.push(out.to_str().unwrap());
    let child = spawn(&all);
    let pid = memcached_of(&child);
    let o = wait(child, LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    // The agent stopped the memcached it started.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "memcached {pid} outlived the test"
    );
    let r = json(&out);
    let x = kv(&r);
    let (gets, sets) = (u(&x["gets"]), u(&x["sets"]));
    assert!(gets > 2000 && sets > 100, "{x}");
    let slack = |n: u64| 50 + n / 50;
    for (ours, name) in [
        (gets, "cmd_get"),
        (sets, "cmd_set"),
        (u(&x["hits"]), "get_hits"),
        (u(&x["misses"]), "get_misses"),
    ] {
        let theirs = d(x, name);
        assert!(
            ours.abs_diff(theirs) <= slack(ours.max(theirs)),
            "{name}: linerate {ours}, memcached {theirs}: {x}"
        );
    }
    // Every key was set before the window and fits: every get hits, and
    // every value is what was set.
    assert_eq!(f(&x["hit_ratio"]), 1.0, "{x}");
    assert_eq!(r["summary"]["hit_ratio"].as_f64(), Some(1.0));
    assert_eq!(u(&x["bad_values"]), 0, "{x}");
    assert_eq!(u(&x["errors"]), 0, "{x}");
    assert_eq!(u(&x["prefill"]["keys"]), 2000, "{x}");
    // 90/10 by default.
    let share = gets as f64 / (gets + sets) as f64;
    assert!((share - 0.9).abs() < 0.03, "get share {share}");
    // Ops/s is the summary's transactions/s; memcached's CPU is measured.
    let ops = f(&x["ops_per_s"]);
    assert!((f(&r["summary"]["transactions_per_s"]) / ops - 1.0).abs() < 1e-6);
    assert!(f(&x["server_us_per_op"]) > 0.0, "{x}");
    assert!(x["get_latency_us"]["p99"].as_f64().unwrap() > 0.0);
    assert!(x["set_latency_us"]["count"].as_u64().unwrap() > 0);
}

#[test]
fn meta_commands_and_multiget_count_every_key() {
    let r = run_json(
        "kv-meta.json",
        "memcache --protocol meta --multiget 4 --get-set 1:0 --flows 2 --keys 500 --values 4-100 --zipf 0.99 -d 1.5 --warmup 0.5",
        LIMIT,
    );
    let x = kv(&r);
    assert_eq!(u(&x["sets"]), 0);
    let gets = u(&x["gets"]);
    assert!(gets > 1000, "{x}");
    let theirs = d(x, "cmd_get");
    // memcached's counters are read at the agent's window edges, the gets
    // counted in the client's: on a noisy host they can be tens of ms
    // apart (a full-suite run saw 3.3%, 685,712 vs 708,664). Counting one
    // get per multiget of 4 would be 75% off.
    assert!(
        gets.abs_diff(theirs) <= 50 + gets / 20,
        "{gets} vs {theirs}"
    );
    assert_eq!(f(&x["hit_ratio"]), 1.0, "{x}");
    assert_eq!(u(&x["bad_values"]), 0);
}

#[test]
fn evictions_show_as_misses() {
    // 4,000 keys of 5-20 KB (~50 MB) in 8 MB: most keys are gone again.
    let out = tmp("kv-evict2.json");
    let o = run(
        &[
            "run",
            "memcache",
            "--service",
            "memcached -m 8",
            "--flows",
            "2",
            "--keys",
            "4000",
            "--values",
            "5K-20K",
            "-d",
            "1.5",
            "--warmup",
            "0.5",
            "-q",
            "--json",
            out.to_str().unwrap(),
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&out);
    let x = kv(&r);
    let h = f(&x["hit_ratio"]);
    assert!(h < 0.5, "8 MB cannot hold 50 MB: hit ratio {h}: {x}");
    assert!(d(x, "evictions") > 0 || x["server"]["end"]["curr_items"].as_i64().unwrap() < 4000);
    // A miss is not a bad value.
    assert_eq!(u(&x["bad_values"]), 0, "{x}");
}

#[test]
fn corrupted_values_are_detected() {
    let m = Memcached::start(&[]);
    let out = tmp("kv-corrupt.json");
    let addr = m.addr();
    let child = spawn(&[
        "run",
        "memcache",
        "--target",
        &addr,
        "--flows",
        "2",
        "--keys",
        "200",
        "--values",
        "1K",
        "--get-set",
        "1:0",
        "-d",
        "2",
        "--warmup",
        "0.5",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ]);
    // Once the prefill is in, a second client overwrites every key with a
    // value of the wrong length, again and again for a second.
    // Keys are "lr" and the zero-padded index, 16 bytes by default.
    let keys: Vec<String> = (0..200).map(|i| format!("lr{i:014}")).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = m.ask("stats\r\n", "END\r\n");
        let items = stats
            .lines()
            .find_map(|l| l.strip_prefix("STAT curr_items "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if items >= 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no prefill seen");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(700));
    let mut s = TcpStream::connect(("127.0.0.1", m.port)).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        for k in &keys {
            s.write_all(format!("set {k} 0 0 5\r\nhello\r\n").as_bytes())
                .unwrap();
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert_eq!(line, "STORED\r\n");
        }
    }
    let o = wait(child, LIMIT);
    assert!(o.status.success(), "{}", stderr(&o));
    let res = json(&out);
    let x = kv(&res);
    assert!(u(&x["bad_values"]) > 100, "{x}");
    assert!(
        x["first_problem"].as_str().unwrap().contains("5 bytes"),
        "{x}"
    );
    // --target: memcached's stats come from the client side; no server CPU.
    assert!(d(x, "cmd_get") > 0, "{x}");
    assert!(x["server_us_per_op"].is_null(), "{x}");
}

/// Children of `pid` whose command is `name`.
fn children(pid: u32, name: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = &stat[stat.find('(').unwrap() + 1..close];
        let ppid: u32 = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        if comm == name && ppid == pid {
            v.push(p);
        }
    }
    v
}

/// The memcached the embedded agent (a `linerate serve` child of the
/// linerate process the test spawned) started: a grandchild.
fn memcached_of(child: &Child) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let agents = children(child.id(), "linerate");
        if let Some(&p) = agents
            .iter()
            .flat_map(|&a| children(a, "memcached"))
            .collect::<Vec<_>>()
            .first()
        {
            return p;
        }
        assert!(Instant::now() < deadline, "no memcached started");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn memcached_killed_mid_test_gives_partial_results() {
    let out = tmp("kv-killed.json");
    let child = spawn(&[
        "run",
        "memcache",
        "--flows",
        "2",
        "--keys",
        "1000",
        "-d",
        "6",
        "--warmup",
        "0.5",
        "-q",
        "--json",
        out.to_str().unwrap(),
    ]);
    let pid = memcached_of(&child);
    std::thread::sleep(Duration::from_millis(2500));
    // Our own grandchild, by PID.
    unsafe { libc_kill(pid as i32, 9) };
    let t = Instant::now();
    let o = wait(child, LIMIT);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
    assert_no_panic(&o);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    let last = e.lines().last().unwrap_or("");
    assert!(last.contains("memcached"), "{e}");
    assert!(last.contains("signal 9") || last.contains("failed"), "{e}");
    // What was measured before is kept.
    let r = json(&out);
    assert_eq!(r["summary"]["status"], "partial");
    assert!(u(&r["iterations"][0]["kv"]["gets"]) > 0, "{r}");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, want) in [
        ("memcache --get-set 0:0", "no operation"),
        ("memcache --values 2K-1K", "reversed"),
        ("memcache --values 2M", "1,000,000"),
        ("memcache --service sh", "only memcached"),
        (
            "memcache --service memcached --target 127.0.0.1:1",
            "cannot be used",
        ),
        ("stream --keys 10", "applies to memcache"),
    ] {
        let o = run_str(&format!("run {args} -d 1"), LIMIT);
        assert_no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args}: {}", stderr(&o));
    }
    // A memcached that is not there: the agent says which package.
    let o = run(
        &[
            "run",
            "memcache",
            "--service",
            "/nonexistent/memcached",
            "-d",
            "1",
        ],
        LIMIT,
    );
    assert_no_panic(&o);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("apt install memcached"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}
