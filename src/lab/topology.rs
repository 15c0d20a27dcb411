//! Building and removing a lab: three namespaces (client, router, server),
//! two veth links, addresses from 198.18.0.0/15, per-namespace TCP settings,
//! and the emulator in the router. iproute2, iptables-legacy and ethtool do
//! the plumbing: they are what a network engineer would type, and their
//! errors are readable as they are.
//!
//! ```text
//!  client ns            router ns                       server ns
//!  lr0 198.18.0.1 ---- c0 198.18.0.254 | s0 198.18.1.254 ---- lr0 198.18.1.1
//!                       NFQUEUE 0 (c->s)   NFQUEUE 1 (s->c)
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::emulator;
use super::netns;
use crate::model::lab::EmulatorCpu;

use super::state::{self, EmulatorState, LabState};
use crate::model::lab::LabSpec;

/// Receive and send buffer limits in the client and server namespaces:
/// large enough for a 1 Gbit/s x 200 ms path (25 MB) so that only the
/// window under test limits a transfer; set explicitly, not inherited.
pub const TCP_RMEM: &str = "4096 131072 33554432";
pub const TCP_WMEM: &str = "4096 16384 33554432";

/// A lab name becomes part of namespace names: keep it short and plain.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 24
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "lab name '{name}' must be 1-24 characters of a-z, 0-9 and '-'"
        ))
    }
}

fn ns_names(name: &str) -> [String; 3] {
    ["c", "r", "s"].map(|r| format!("lr-{name}-{r}"))
}

/// Runs a plumbing command; its stderr becomes the error.
fn sh(prog: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!("cannot run {prog}: {e} (install iproute2, iptables and ethtool; the lab needs root)")
        })?;
    if !out.status.success() {
        return Err(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn ip(ns: &str, args: &[&str]) -> Result<(), String> {
    let mut a = vec!["-n", ns];
    a.extend_from_slice(args);
    sh("ip", &a)
}

/// Runs `prog` inside namespace `ns`.
fn in_ns(ns: &str, prog: &str, args: &[&str]) -> Result<(), String> {
    let mut a = vec!["netns", "exec", ns, prog];
    a.extend_from_slice(args);
    sh("ip", &a)
}

/// Whether this kernel has netem: try it on the router's link.
fn netem_available(router: &str) -> bool {
    let ok = sh(
        "ip",
        &[
            "netns", "exec", router, "tc", "qdisc", "add", "dev", "c0", "root", "netem", "delay",
            "1ms",
        ],
    )
    .is_ok();
    if ok {
        let _ = in_ns(router, "tc", &["qdisc", "del", "dev", "c0", "root"]);
    }
    ok
}

/// Which emulator to use: `auto` probes (netem if the kernel has it, else
/// the NFQUEUE delay element), or the named one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Auto,
    Nfqueue,
    Netem,
    /// No emulator: the router forwards plainly (a baseline).
    None,
}

/// Brings lab `name` up and returns its state (also saved for other
/// processes). On any failure, whatever was made is removed again.
pub fn up(
    name: &str,
    spec: &LabSpec,
    backend: Backend,
    owner: Option<u32>,
) -> Result<LabState, String> {
    check_name(name)?;
    sweep_stale();
    if let Some(s) = state::load(name)? {
        if !s.is_stale() {
            return Err(format!(
                "lab {name} is already up (since {}); take it down first: linerate lab down {name}",
                s.created_at
            ));
        }
    }
    // Left over from a crash: a stale state file or bare namespaces.
    down(name)?;
    let result = build(name, spec, backend, owner);
    if result.is_err() {
        let _ = down(name);
    }
    result
}

fn build(
    name: &str,
    spec: &LabSpec,
    backend: Backend,
    owner: Option<u32>,
) -> Result<LabState, String> {
    let [c, r, s] = ns_names(name);
    for ns in [&c, &r, &s] {
        sh("ip", &["netns", "add", ns])?;
        ip(ns, &["link", "set", "lo", "up"])?;
    }
    ip(
        &c,
        &[
            "link", "add", "lr0", "type", "veth", "peer", "name", "c0", "netns", &r,
        ],
    )?;
    ip(
        &s,
        &[
            "link", "add", "lr0", "type", "veth", "peer", "name", "s0", "netns", &r,
        ],
    )?;
    let mtu = spec.mtu.to_string();
    let links = [
        (&c, "lr0", state::CLIENT_ADDR),
        (&r, "c0", state::ROUTER_CLIENT_ADDR),
        (&r, "s0", state::ROUTER_SERVER_ADDR),
        (&s, "lr0", state::SERVER_ADDR),
    ];
    for (ns, dev, addr) in links {
        ip(ns, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
        ip(ns, &["link", "set", "dev", dev, "mtu", &mtu, "up"])?;
        if !spec.offloads {
            in_ns(
                ns,
                "ethtool",
                &["-K", dev, "tso", "off", "gso", "off", "gro", "off"],
            )?;
        }
    }
    ip(
        &c,
        &["route", "add", "default", "via", state::ROUTER_CLIENT_ADDR],
    )?;
    ip(
        &s,
        &["route", "add", "default", "via", state::ROUTER_SERVER_ADDR],
    )?;
    netns::sysctls(&r, &[("net.ipv4.ip_forward", "1".into())])?;
    let host_changes = allow_congestion_control(&spec.cc)?;
    for ns in [&c, &s] {
        netns::sysctls(
            ns,
            &[
                ("net.ipv4.tcp_congestion_control", spec.cc.clone()),
                ("net.ipv4.tcp_no_metrics_save", "1".into()),
                ("net.ipv4.tcp_rmem", TCP_RMEM.into()),
                ("net.ipv4.tcp_wmem", TCP_WMEM.into()),
            ],
        )
        .map_err(|e| {
            if e.contains("tcp_congestion_control") {
                let avail =
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                        .unwrap_or_default();
                format!("{e}; this kernel offers: {}", avail.trim())
            } else {
                e
            }
        })?;
    }

    let netem = match backend {
        Backend::Netem => true,
        Backend::Nfqueue | Backend::None => false,
        Backend::Auto => netem_available(&r),
    };
    let (backend_name, note, emulator) = if backend == Backend::None {
        if spec.shapes() {
            return Err(
                "--emulator none forwards plainly: drop --rtt/--delay/--rate/--loss/--jitter"
                    .into(),
            );
        }
        ("none", "plain veth forwarding, asked for".to_string(), None)
    } else if netem {
        apply_netem(&r, spec)?;
        ("netem", "the kernel has netem".to_string(), None)
    } else {
        let why = match backend {
            Backend::Nfqueue => "asked for",
            _ => "netem is not in this kernel",
        };
        let note = format!("{why}{}", place(&[&c, &r, &s], spec, false)?);
        let e = start_emulator(name, &r, spec)?;
        ("nfqueue", note, Some(e))
    };
    let owner_start_ticks = owner.and_then(state::start_ticks);
    let st = LabState {
        name: name.to_string(),
        spec: spec.clone(),
        backend: backend_name.to_string(),
        backend_note: note,
        client_ns: c,
        router_ns: r,
        server_ns: s,
        client_addr: state::CLIENT_ADDR.into(),
        server_addr: state::SERVER_ADDR.into(),
        emulator,
        owner_pid: owner,
        owner_start_ticks,
        host_changes,
        calibration: None,
        created_at: crate::units::rfc3339_now(),
    };
    state::save(&st)?;
    Ok(st)
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A namespace may only make a congestion control its default if the host
/// lists it in tcp_allowed_congestion_control (else EPERM; this kernel
/// allows "reno bbr"). Adds `cc` there when missing and says so: it widens
/// what every process may choose, host-wide, and changes nothing else.
fn allow_congestion_control(cc: &str) -> Result<Vec<String>, String> {
    let allowed = std::fs::read_to_string(ALLOWED_CC).map_err(|e| format!("{ALLOWED_CC}: {e}"))?;
    if allowed.split_whitespace().any(|c| c == cc) {
        return Ok(vec![]);
    }
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !avail.split_whitespace().any(|c| c == cc) {
        return Err(format!(
            "congestion control '{cc}' is not in this kernel; it offers: {}",
            avail.trim()
        ));
    }
    let new = format!("{} {cc}", allowed.trim());
    std::fs::write(ALLOWED_CC, &new)
        .map_err(|e| format!("cannot add {cc} to net.ipv4.tcp_allowed_congestion_control: {e}"))?;
    Ok(vec![format!(
        "added {cc} to the host's net.ipv4.tcp_allowed_congestion_control (now \"{new}\") so the lab's namespaces may default to it"
    )])
}

/// netem on the router's egress: s0 carries client->server, c0 the reverse.
/// The queue limit (packets) stays above the path's BDP.
fn apply_netem(router: &str, spec: &LabSpec) -> Result<(), String> {
    for (dir, dev) in [(0, "s0"), (1, "c0")] {
        let l = &spec.links[dir];
        let mut args: Vec<String> = ["qdisc", "replace", "dev", dev, "root", "netem"]
            .map(String::from)
            .to_vec();
        args.push("delay".into());
        args.push(format!("{}us", (l.delay_s * 1e6).round()));
        if l.jitter_s > 0.0 {
            args.push(format!("{}us", (l.jitter_s * 1e6).round()));
        }
        if let Some(rate) = l.rate_bps {
            args.push("rate".into());
            args.push(format!("{}bit", rate.round()));
        }
        if l.loss > 0.0 {
            args.push("loss".into());
            args.push(format!("{}%", l.loss * 100.0));
        }
        let pkts = l.queue_bytes.map_or(100_000, |b| (b / 1500).max(1000));
        args.push("limit".into());
        args.push(pkts.to_string());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        in_ns(router, "tc", &refs)?;
    }
    Ok(())
}

/// The emulator config for a lab spec (queues 0 and 1 in the router).
pub fn emulator_config(name: &str, spec: &LabSpec) -> emulator::Config {
    emulator::Config {
        queues: [0, 1],
        shaping: [super::spec::shaping(spec, 0), super::spec::shaping(spec, 1)],
        per_packet: spec.per_packet || spec.has_loss(),
        mtu: spec.mtu,
        stats: Some(PathBuf::from(state::STATE_DIR).join(format!("{name}.emulator.json"))),
        seed: 0,
        cpu: placement(spec).ok().flatten().map(|p| p.emulator),
    }
}

/// Where the emulator runs and where the lab's receive processing goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub emulator: usize,
    /// CPUs the lab links' receive processing is steered to (RPS); empty:
    /// not steered.
    pub others: Vec<usize>,
}

/// The placement `spec` asks for on this machine (None: none). The
/// emulator's CPU must be one this process may use.
pub fn placement(spec: &LabSpec) -> Result<Option<Placement>, String> {
    let per_packet = spec.per_packet || spec.has_loss();
    placement_among(
        spec.emulator_cpu,
        per_packet,
        &crate::measure::placement::allowed_cpus(),
    )
}

/// `auto` places only a per-packet emulator: there it raised the capacity
/// from 2.8-3.8 to 5.3-5.9 Gbit/s and cut its CPU at 1 Gbit/s from 39% to
/// 24% of a core, while a GSO emulator costs 8-9% at 1 Gbit/s either way and
/// lost capacity when placed (36 against 49 Gbit/s: its few super-packets
/// leave a pinned CPU idle). An explicit CPU places either mode.
fn placement_among(
    choice: EmulatorCpu,
    per_packet: bool,
    allowed: &[usize],
) -> Result<Option<Placement>, String> {
    let emulator = match choice {
        EmulatorCpu::Off => return Ok(None),
        EmulatorCpu::Auto if allowed.len() < 2 || !per_packet => return Ok(None),
        EmulatorCpu::Auto => allowed[allowed.len() - 1],
        EmulatorCpu::Cpu(n) => {
            let n = n as usize;
            if !allowed.contains(&n) {
                return Err(format!(
                    "--emulator-cpu {n}: this process may use CPUs {} (or use auto or off)",
                    crate::units::fmt_cpu_list(allowed)
                ));
            }
            n
        }
    };
    let others = allowed.iter().copied().filter(|&c| c != emulator).collect();
    Ok(Some(Placement { emulator, others }))
}

/// Applies the placement of `spec` to the lab's links and returns what to
/// add to the backend note. Without a placement the links are left alone,
/// or set back to unsteered when `reset` (a running lab being reshaped).
fn place(names: &[&String; 3], spec: &LabSpec, reset: bool) -> Result<String, String> {
    let Some(p) = placement(spec)? else {
        if reset {
            steer(names, &[])?;
        }
        return Ok(String::new());
    };
    steer(names, &p.others)?;
    let mut note = format!("; emulator on CPU {}", p.emulator);
    if !p.others.is_empty() {
        note.push_str(&format!(
            ", the lab's packet processing on CPU {} (RPS)",
            crate::units::fmt_cpu_list(&p.others)
        ));
    }
    Ok(note)
}

/// An `rps_cpus` mask: hex in comma-separated 32-bit groups, most
/// significant first, as the kernel reads it.
fn rps_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Steers the receive processing of the lab links to `cpus` (RPS on every
/// receive queue of the four veth ends), so that a packet the emulator
/// releases is forwarded and delivered on another CPU, not inside its
/// verdict call.
fn steer(names: &[&String; 3], cpus: &[usize]) -> Result<(), String> {
    let mask = if cpus.is_empty() {
        "0".to_string()
    } else {
        rps_mask(cpus)
    };
    let [c, r, s] = names;
    for (ns, dev) in [(c, "lr0"), (r, "c0"), (r, "s0"), (s, "lr0")] {
        let script = format!(
            "for q in /sys/class/net/{dev}/queues/rx-*/rps_cpus; do echo {mask} > \"$q\"; done"
        );
        in_ns(ns, "sh", &["-c", &script])?;
    }
    Ok(())
}

fn start_emulator(name: &str, router: &str, spec: &LabSpec) -> Result<EmulatorState, String> {
    for (dev, q) in [("c0", "0"), ("s0", "1")] {
        in_ns(
            router,
            "iptables-legacy",
            &[
                "-A",
                "FORWARD",
                "-i",
                dev,
                "-j",
                "NFQUEUE",
                "--queue-num",
                q,
            ],
        )?;
    }
    spawn_emulator(name, router, emulator_config(name, spec))
}

/// Starts `linerate lab emulate` in the router namespace, in its own session
/// (it outlives `lab up`), and waits for its first counters: they are
/// written once both queues are bound.
pub fn spawn_emulator(
    name: &str,
    router: &str,
    config: emulator::Config,
) -> Result<EmulatorState, String> {
    std::fs::create_dir_all(state::STATE_DIR).map_err(|e| format!("{}: {e}", state::STATE_DIR))?;
    let stats = config.stats.clone().expect("a stats path");
    let _ = std::fs::remove_file(&stats);
    let log = PathBuf::from(state::STATE_DIR).join(format!("{name}.emulator.log"));
    let logf = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find linerate: {e}"))?;
    let json = serde_json::to_string(&config).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["lab", "emulate", "--config", &json])
        .stdin(Stdio::null())
        .stdout(logf.try_clone().map_err(|e| e.to_string())?)
        .stderr(logf);
    netns::command_in(&mut cmd, router)?;
    // SAFETY: setsid is async-signal-safe; a new session keeps the emulator
    // from a terminal's Ctrl-C aimed at the `lab up` that started it.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the emulator: {e}"))?;
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "the emulator exited at start ({status}): {}",
                text.trim().lines().last().unwrap_or("no message")
            ));
        }
        if stats.exists() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the emulator did not start within 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let start_ticks = state::start_ticks(pid).unwrap_or(0);
    // The emulator belongs to the lab, not to this process: it is reaped by
    // init once we exit, and stopped by PID at `lab down`.
    std::mem::forget(child);
    Ok(EmulatorState {
        pid,
        start_ticks,
        stats,
        config,
    })
}

/// Stops an emulator we started (SIGTERM, then SIGKILL after 2 s).
pub fn stop_emulator(e: &EmulatorState) {
    if !state::alive(e.pid, e.start_ticks) {
        return;
    }
    // SAFETY: signals a PID we checked is the emulator we started.
    unsafe { libc::kill(e.pid as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while state::alive(e.pid, e.start_ticks) && Instant::now() < deadline {
        reap(e.pid);
        std::thread::sleep(Duration::from_millis(10));
    }
    if state::alive(e.pid, e.start_ticks) {
        // SAFETY: as above.
        unsafe { libc::kill(e.pid as i32, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(20));
    }
    reap(e.pid);
}

/// Collects the exit status if the emulator is our child (the study's own lab).
fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: non-blocking wait on one PID; fails harmlessly if not our child.
    unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
}

/// Changes the link of a running lab (a study's RTT axis): the emulator is
/// restarted with the new spec; namespaces, addresses and rules stay.
pub fn reshape(st: &mut LabState, spec: &LabSpec) -> Result<(), String> {
    if spec.mtu != st.spec.mtu || spec.offloads != st.spec.offloads || spec.cc != st.spec.cc {
        return Err("only delay, jitter, rate, queue and loss change on a running lab".into());
    }
    match st.backend.as_str() {
        "netem" => apply_netem(&st.router_ns, spec)?,
        "none" => return Err("a lab without an emulator cannot change its link".into()),
        _ => {
            if let Some(e) = &st.emulator {
                stop_emulator(e);
            }
            let names = [&st.client_ns, &st.router_ns, &st.server_ns];
            let placed = place(&names, spec, true)?;
            let why = st.backend_note.split("; ").next().unwrap_or("").to_string();
            st.backend_note = format!("{why}{placed}");
            let cfg = emulator_config(&st.name, spec);
            st.emulator = Some(spawn_emulator(&st.name, &st.router_ns, cfg)?);
        }
    }
    st.spec = spec.clone();
    st.calibration = None;
    state::save(st)
}

/// Takes lab `name` down: the emulator, the namespaces (their links and
/// iptables rules go with them) and the state files. Safe to repeat.
pub fn down(name: &str) -> Result<bool, String> {
    check_name(name)?;
    let st = state::load(name).ok().flatten();
    if let Some(e) = st.as_ref().and_then(|s| s.emulator.as_ref()) {
        stop_emulator(e);
    }
    let mut found = st.is_some();
    for ns in ns_names(name) {
        if netns::exists(&ns) {
            found = true;
            sh("ip", &["netns", "del", &ns])?;
        }
    }
    let dir = PathBuf::from(state::STATE_DIR);
    for f in [
        format!("{name}.json"),
        format!("{name}.emulator.json"),
        format!("{name}.emulator.log"),
    ] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    Ok(found)
}

/// Removes labs whose emulator or owning process is gone (a killed study
/// or test); returns their names.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for name in state::list() {
        if let Ok(Some(s)) = state::load(&name) {
            if s.is_stale() && down(&name).is_ok() {
                removed.push(name);
            }
        }
    }
    removed
}

/// A lab owned by this process (a study's or a test's): taken down when
/// dropped, also on error paths and after Ctrl-C.
pub struct OwnedLab {
    pub state: LabState,
}

impl OwnedLab {
    pub fn up(name: &str, spec: &LabSpec, backend: Backend) -> Result<OwnedLab, String> {
        let state = up(name, spec, backend, Some(std::process::id()))?;
        Ok(OwnedLab { state })
    }
}

impl Drop for OwnedLab {
    fn drop(&mut self) {
        let _ = down(&self.state.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_places_a_per_packet_emulator_on_the_last_cpu() {
        let p = placement_among(EmulatorCpu::Auto, true, &[0, 1, 2, 3]).unwrap();
        assert_eq!(
            p,
            Some(Placement {
                emulator: 3,
                others: vec![0, 1, 2]
            })
        );
        // GSO mode, one CPU, or off: not placed.
        assert_eq!(placement_among(EmulatorCpu::Auto, false, &[0, 1]), Ok(None));
        assert_eq!(placement_among(EmulatorCpu::Auto, true, &[0]), Ok(None));
        assert_eq!(placement_among(EmulatorCpu::Off, true, &[0, 1]), Ok(None));
        // An explicit CPU places either mode; it must be allowed.
        let p = placement_among(EmulatorCpu::Cpu(0), false, &[0, 1]).unwrap();
        assert_eq!(
            p,
            Some(Placement {
                emulator: 0,
                others: vec![1]
            })
        );
        let e = placement_among(EmulatorCpu::Cpu(7), true, &[0, 1]).unwrap_err();
        assert!(e.contains("CPUs 0-1"), "{e}");
    }

    #[test]
    fn rps_masks_in_32_bit_groups() {
        assert_eq!(rps_mask(&[0]), "00000001");
        assert_eq!(rps_mask(&[0, 1, 2]), "00000007");
        assert_eq!(rps_mask(&[1, 33]), "00000002,00000002");
        assert_eq!(rps_mask(&[63]), "80000000,00000000");
    }

    #[test]
    fn emulator_cpu_parses() {
        assert_eq!("auto".parse(), Ok(EmulatorCpu::Auto));
        assert_eq!("off".parse(), Ok(EmulatorCpu::Off));
        assert_eq!("3".parse(), Ok(EmulatorCpu::Cpu(3)));
        assert!("-1".parse::<EmulatorCpu>().is_err());
    }
}
