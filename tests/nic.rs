//! NIC settings as study axes (`nic.*`), root only: a lab study that sweeps
//! GRO records what each end's interface had and leaves the interfaces as
//! they were; an agent started with `serve --allow-nic` in a namespace of
//! the test's own applies them on its data interface, journals the values
//! before, and puts them back after the test and, after a SIGKILL, at its
//! next start. Labs and namespaces are named nic-*; traffic stays in
//! 198.18.0.0/15 inside them.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sh(args: &[&str]) -> String {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `ethtool -k IF` in namespace `ns`.
fn features(ns: &str, dev: &str) -> String {
    sh(&["ip", "netns", "exec", ns, "ethtool", "-k", dev])
}

fn gro(ns: &str, dev: &str) -> String {
    features(ns, dev)
        .lines()
        .find_map(|l| l.strip_prefix("generic-receive-offload: "))
        .unwrap_or("?")
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// A lab `nic-{pid}-{tag}`, downed on drop.
struct NicLab {
    name: String,
}

impl NicLab {
    fn up(tag: &str) -> NicLab {
        let name = format!("nic-{}-{tag}", std::process::id());
        let lab = NicLab { name: name.clone() };
        let o = run(&["lab", "up", &name], Duration::from_secs(90));
        assert!(o.status.success(), "lab up: {}", stderr(&o));
        lab
    }
    fn ns(&self, role: &str) -> String {
        format!("lr-{}-{role}", self.name)
    }
}

impl Drop for NicLab {
    fn drop(&mut self) {
        let _ = run(&["lab", "down", &self.name], Duration::from_secs(30));
    }
}

fn study_file(name: &str, body: &str) -> std::path::PathBuf {
    let p = tmp(&format!("{name}.toml"));
    std::fs::write(
        &p,
        format!("title = \"{name}\"\ndescription = \"a test's study\"\n{body}"),
    )
    .unwrap();
    p
}

fn points(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("points"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v.iter().map(json).collect()
}

#[test]
fn a_lab_study_sweeps_gro_records_each_point_and_leaves_the_links_as_they_were() {
    if !root() {
        eprintln!("skipped: needs root");
        return;
    }
    let lab = NicLab::up("gro");
    let (c, s) = (lab.ns("c"), lab.ns("s"));
    let before = (features(&c, "lr0"), features(&s, "lr0"));
    let file = study_file(
        "nic-gro",
        "[test]\nworkload = \"rr\"\nduration = \"1s\"\nwarmup = \"0.5s\"\n\
         [sweep]\nnic.gro = [true, false]\nnic.rx-ring = [256]\n",
    );
    let out = tmp("nic-gro-out");
    let dir = study_ok_with(&file, &out, &["--lab", &lab.name], Duration::from_secs(120));
    let pts = points(&dir);
    assert_eq!(pts.len(), 2);
    for r in &pts {
        let asked = r["spec"]["nic"]["gro"].as_str().unwrap().to_string();
        assert_eq!(r["spec"]["nic"]["rx-ring"], "256");
        assert!(f(&r["summary"]["transactions_per_s"]) > 0.0, "{r}");
        // The point ran in the lab, and its result says so.
        assert_eq!(r["lab"]["name"], lab.name.as_str(), "{}", r["lab"]);
        for (end, ns) in [("client", &c), ("agent", &s)] {
            let nic = &r["environment"][end]["nic"][0];
            assert_eq!(nic["name"], "lr0", "{end}: {nic}");
            assert_eq!(nic["namespace"].as_str(), Some(ns.as_str()));
            // Read back from the interface while the point ran.
            assert_eq!(nic["had"]["gro"].as_str(), Some(asked.as_str()), "{nic}");
            // veth has no rings: refused in the driver's words, not skipped.
            let refused = nic["refused"].as_array().unwrap();
            assert_eq!(refused.len(), 1, "{nic}");
            assert_eq!(refused[0]["setting"], "rx-ring");
            assert_eq!(refused[0]["wanted"], "256");
            assert!(
                refused[0]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("not supported"),
                "{nic}"
            );
        }
    }
    let after = (features(&c, "lr0"), features(&s, "lr0"));
    assert_eq!(before, after, "the links are back as they were");
    let _ = std::fs::remove_dir_all(&out);
}

/// Two namespaces joined by a veth pair (198.18.77.1 in `a`, .2 in `b`),
/// deleted on drop.
struct Pair {
    a: String,
    b: String,
}

impl Pair {
    fn up() -> Pair {
        let id = std::process::id();
        let p = Pair {
            a: format!("nic-{id}-a"),
            b: format!("nic-{id}-b"),
        };
        sh(&["ip", "netns", "add", &p.a]);
        sh(&["ip", "netns", "add", &p.b]);
        sh(&[
            "ip", "-n", &p.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns",
            &p.b,
        ]);
        sh(&[
            "ip",
            "-n",
            &p.a,
            "addr",
            "add",
            "198.18.77.1/24",
            "dev",
            "va",
        ]);
        sh(&[
            "ip",
            "-n",
            &p.b,
            "addr",
            "add",
            "198.18.77.2/24",
            "dev",
            "vb",
        ]);
        for (ns, dev) in [(&p.a, "va"), (&p.b, "vb")] {
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        p
    }

    /// The journal an agent in `a` keeps (named by the namespace's inode).
    fn journal(&self) -> std::path::PathBuf {
        let ino = std::fs::metadata(format!("/run/netns/{}", self.a))
            .unwrap()
            .ino();
        std::path::PathBuf::from(format!("/run/linerate/nic-journal-{ino}.json"))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// `linerate serve` in namespace `ns` (killed by PID on drop).
struct NsAgent {
    child: std::process::Child,
    addr: String,
}

impl NsAgent {
    fn start(ns: &str, token: &std::path::Path, extra: &[&str]) -> NsAgent {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                bin(),
                "serve",
                "--listen",
                "198.18.77.1:0",
            ])
            .args(["--token-file", token.to_str().unwrap(), "--no-crypto-twin"])
            .args(extra)
            .env_remove("LINERATE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line.trim().rsplit(' ').next().unwrap().to_string();
        assert!(addr.starts_with("198.18.77.1:"), "agent said {line:?}");
        NsAgent { child, addr }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NsAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

fn study_args<'a>(
    pair: &'a Pair,
    file: &'a str,
    agent: &'a str,
    token: &'a str,
    out: &'a str,
) -> Vec<&'a str> {
    vec![
        "netns",
        "exec",
        &pair.b,
        bin(),
        "study",
        "run",
        file,
        "--agent",
        agent,
        "--token-file",
        token,
        "--out",
        out,
        "-q",
    ]
}

#[test]
fn serve_allow_nic_applies_puts_back_and_after_a_sigkill_its_next_start_restores() {
    if !root() {
        eprintln!("skipped: needs root");
        return;
    }
    let pair = Pair::up();
    let token = token_file("nic-token", "nic-test-token-0123456789");
    // veth starts with GRO off here: turn it on, so that nic.gro = false
    // is a change to see.
    sh(&[
        "ip", "netns", "exec", &pair.a, "ethtool", "-K", "va", "gro", "on",
    ]);
    assert_eq!(gro(&pair.a, "va"), "on");
    let journal = pair.journal();
    let _ = std::fs::remove_file(&journal);

    // Without --allow-nic: refused with the cause and the hint.
    let short = study_file(
        "nic-agent",
        "[test]\nworkload = \"rr\"\nduration = \"1s\"\nwarmup = \"0.5s\"\nnic.gro = false\n",
    );
    let out = tmp("nic-agent-out");
    {
        let plain = NsAgent::start(&pair.a, &token, &[]);
        let o = Command::new("ip")
            .args(study_args(
                &pair,
                short.to_str().unwrap(),
                &plain.addr,
                token.to_str().unwrap(),
                out.to_str().unwrap(),
            ))
            .output()
            .unwrap();
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(
            e.contains("does not change NIC settings") && e.contains("--allow-nic"),
            "{e}"
        );
        assert_eq!(gro(&pair.a, "va"), "on");
    }
    let _ = std::fs::remove_dir_all(&out);

    // With it: applied for the test, read back, put back after.
    let mut agent = NsAgent::start(&pair.a, &token, &["--allow-nic"]);
    let o = Command::new("ip")
        .args(study_args(
            &pair,
            short.to_str().unwrap(),
            &agent.addr,
            token.to_str().unwrap(),
            out.to_str().unwrap(),
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let r = &points(&first_dir(&out))[0];
    let nic = &r["environment"]["agent"]["nic"][0];
    assert_eq!(nic["name"], "va", "{nic}");
    assert_eq!(nic["had"]["gro"], "off", "{nic}");
    assert!(nic.get("refused").is_none(), "{nic}");
    // The controller's end is not changed (applied only by agents).
    assert!(r["environment"]["client"].get("nic").is_none());
    assert_eq!(gro(&pair.a, "va"), "on", "put back after the test");
    assert!(!journal.exists());
    let _ = std::fs::remove_dir_all(&out);

    // SIGKILL mid-test: the setting stays changed and the journal stays.
    let long = study_file(
        "nic-long",
        "[test]\nworkload = \"rr\"\nduration = \"20s\"\nwarmup = \"0.5s\"\nnic.gro = false\n",
    );
    let study = Command::new("ip")
        .args(study_args(
            &pair,
            long.to_str().unwrap(),
            &agent.addr,
            token.to_str().unwrap(),
            out.to_str().unwrap(),
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !(journal.exists() && gro(&pair.a, "va") == "off") {
        assert!(Instant::now() < deadline, "the test never applied gro off");
        std::thread::sleep(Duration::from_millis(100));
    }
    agent.kill(); // SIGKILL
    assert_eq!(gro(&pair.a, "va"), "off", "a killed agent cannot put back");
    assert!(journal.exists(), "the journal outlives the agent");
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(
        text.contains("\"gro\"") && text.contains("\"va\""),
        "{text}"
    );
    let o = wait(study, Duration::from_secs(60));
    assert!(!o.status.success(), "the study lost its agent");

    // The next start puts it back before it listens, and drops the journal.
    let mut next = NsAgent::start(&pair.a, &token, &["--allow-nic"]);
    assert_eq!(gro(&pair.a, "va"), "on", "restored at the next start");
    assert!(!journal.exists(), "the journal is removed once replayed");
    next.kill();
    let _ = std::fs::remove_dir_all(&out);
}
