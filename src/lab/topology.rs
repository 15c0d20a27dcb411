//! Building and removing a lab: client, router and server namespaces, one
//! veth link (a port of the router) per client and per server, addresses
//! from 198.18.0.0/15, per-namespace TCP settings, and the emulators in the
//! router. iproute2, iptables-legacy and ethtool do the plumbing: they are
//! what a network engineer would type, and their errors are readable as
//! they are.
//!
//! ```text
//!  client ns              router ns                        server ns
//!  lr0 198.18.0.1 ---- c0 198.18.0.254 | s0 198.18.1.254 ---- lr0 198.18.1.1
//!                       NFQUEUE 0 (in from c0)
//!                       NFQUEUE 1 (out to c0)
//! ```
//!
//! A rack (`--clients N --servers M`) has more ports: client k in
//! `lr-NAME-c{k+1}` (`lr-NAME-c` for k = 0) on 198.18.{2k}.1 behind the
//! router's `c{k}`, server j in `lr-NAME-s{j+1}` on 198.18.{2j+1}.1 behind
//! `s{j}`. Every client link is emulated by an emulator of its own (queue
//! 2k for what enters from `c{k}`, 2k+1 for what leaves towards it); the
//! server links are not shaped, so N clients together can send N links'
//! worth into one server.

use std::process::Command;
use std::time::{Duration, Instant};

use super::emulator;
use super::netns;
use super::plumb::{in_ns, ip, sh, start_daemon, Daemon};
use crate::model::lab::EmulatorCpu;

use super::state::{self, EmulatorState, LabHost, LabState};
use super::LabError;
use crate::model::lab::LabSpec;
use crate::model::Invalid;

/// A rack's limits: 16 clients (198.18.0-30), 8 servers (198.18.1-15).
pub const MAX_CLIENTS: usize = 16;
pub const MAX_SERVERS: usize = 8;

/// How many clients and servers a lab has, each joined to the router by a
/// link of its own. One and one is the plain lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rack {
    pub clients: usize,
    pub servers: usize,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            clients: 1,
            servers: 1,
        }
    }
}

impl Rack {
    pub fn new(clients: usize, servers: usize) -> Result<Rack, LabError> {
        if !(1..=MAX_CLIENTS).contains(&clients) {
            return Err(LabError::Clients {
                clients,
                max: MAX_CLIENTS,
            });
        }
        if !(1..=MAX_SERVERS).contains(&servers) {
            return Err(LabError::Servers {
                servers,
                max: MAX_SERVERS,
            });
        }
        Ok(Rack { clients, servers })
    }

    /// The counts, as src/lab/link.rs takes them.
    pub fn hosts(&self) -> super::link::Hosts {
        super::link::Hosts {
            clients: self.clients,
            servers: self.servers,
        }
    }

    /// More than one client or server.
    pub fn is_rack(&self) -> bool {
        self.clients > 1 || self.servers > 1
    }

    /// The clients' namespaces and addresses, client 0 first.
    pub fn client_hosts(&self, name: &str) -> Vec<LabHost> {
        (0..self.clients)
            .map(|k| LabHost {
                ns: state::client_ns(name, k),
                addr: state::client_addr(k),
            })
            .collect()
    }

    pub fn server_hosts(&self, name: &str) -> Vec<LabHost> {
        (0..self.servers)
            .map(|j| LabHost {
                ns: state::server_ns(name, j),
                addr: state::server_addr(j),
            })
            .collect()
    }

    /// The rack of a running lab.
    pub fn of(st: &LabState) -> Rack {
        Rack {
            clients: st.client_hosts().len(),
            servers: st.server_hosts().len(),
        }
    }

    /// Every veth end of the lab: (namespace, device); the hosts' `lr0`
    /// and the router's `c{k}` and `s{j}`.
    fn veth_ends(&self, name: &str) -> Vec<(String, String)> {
        let r = state::router_ns(name);
        let mut v = Vec::new();
        for (k, h) in self.client_hosts(name).into_iter().enumerate() {
            v.push((h.ns, "lr0".to_string()));
            v.push((r.clone(), format!("c{k}")));
        }
        for (j, h) in self.server_hosts(name).into_iter().enumerate() {
            v.push((r.clone(), format!("s{j}")));
            v.push((h.ns, "lr0".to_string()));
        }
        v
    }
}

/// What a rack cannot do with this backend or placement, said before
/// anything is built.
pub fn check_rack(spec: &LabSpec, rack: Rack, backend: Backend) -> Result<(), LabError> {
    if rack.is_rack() && backend == Backend::Netem {
        return Err(Invalid::from(
            "--emulator netem shapes on the router's egress and cannot give each client link of a rack (--clients/--servers above 1) its own shaping: use --emulator nfqueue (or auto)",
        )
        .into());
    }
    if rack.clients > 1 {
        if let EmulatorCpu::Cpu(n) = spec.emulator_cpu {
            return Err(Invalid(format!(
                "--emulator-cpu {n} places one emulator; a rack with {} clients runs one per client link, unplaced: use --emulator-cpu auto or off",
                rack.clients
            ))
            .into());
        }
    }
    super::link::check(spec, rack.hosts(), backend == Backend::Netem)
}

/// Receive and send buffer limits in the client and server namespaces:
/// large enough for a 1 Gbit/s x 200 ms path (25 MB) so that only the
/// window under test limits a transfer; set explicitly, not inherited.
pub const TCP_RMEM: &str = "4096 131072 33554432";
pub const TCP_WMEM: &str = "4096 16384 33554432";

/// A lab name becomes part of namespace names: keep it short and plain.
pub fn check_name(name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= 24
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(LabError::Name(name.into()))
    }
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
    rack: Rack,
    backend: Backend,
    owner: Option<u32>,
) -> Result<LabState, LabError> {
    check_name(name)?;
    Rack::new(rack.clients, rack.servers)?;
    check_rack(spec, rack, backend)?;
    super::tunnel::check_plan(spec.tunnel, rack.is_rack())?;
    let _lock = state::lock(name)?;
    sweep_stale();
    if let Some(s) = state::load(name)? {
        if !s.is_stale() {
            return Err(LabError::AlreadyUp {
                name: name.into(),
                since: s.created_at,
            });
        }
    }
    // Left over from a crash: a stale state file or bare namespaces.
    down_locked(name)?;
    let result = build(name, spec, rack, backend, owner);
    if result.is_err() {
        let _ = down_locked(name);
    }
    result
}

fn build(
    name: &str,
    spec: &LabSpec,
    rack: Rack,
    backend: Backend,
    owner: Option<u32>,
) -> Result<LabState, LabError> {
    let r = state::router_ns(name);
    let clients = rack.client_hosts(name);
    let servers = rack.server_hosts(name);
    let hosts: Vec<&LabHost> = clients.iter().chain(servers.iter()).collect();
    for ns in std::iter::once(&r).chain(hosts.iter().map(|h| &h.ns)) {
        sh("ip", &["netns", "add", ns])?;
        ip(ns, &["link", "set", "lo", "up"])?;
    }
    // Every link (src/lab/link.rs: veth, bridge or macvlan; the server's
    // extra ports), addressed, up, and each host's route through it.
    for p in super::link::ports(name, rack.hosts(), spec.ports) {
        super::link::wire(&p, &r, spec)?;
    }
    netns::sysctls(&r, &[("net.ipv4.ip_forward", "1".into())])?;
    let host_changes = allow_congestion_control(&spec.cc)?;
    for h in &hosts {
        netns::sysctls(
            &h.ns,
            &[
                ("net.ipv4.tcp_congestion_control", spec.cc.clone()),
                ("net.ipv4.tcp_no_metrics_save", "1".into()),
                ("net.ipv4.tcp_rmem", TCP_RMEM.into()),
                ("net.ipv4.tcp_wmem", TCP_WMEM.into()),
            ],
        )
        .map_err(|e| match &e {
            LabError::SetSysctl { key, .. } if key.contains("tcp_congestion_control") => {
                let avail =
                    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                        .unwrap_or_default();
                LabError::CcRefused {
                    source: Box::new(e),
                    offers: avail.trim().into(),
                }
            }
            _ => e,
        })?;
    }

    let aqm = spec.aqm.kind != crate::model::lab::AqmKind::Fifo;
    if aqm && matches!(backend, Backend::Netem | Backend::None) {
        return Err(Invalid::from(
            "--aqm lives in the NFQUEUE emulator: drop --emulator, or use --emulator nfqueue",
        )
        .into());
    }
    let netem = match backend {
        Backend::Netem => true,
        Backend::Nfqueue | Backend::None => false,
        // netem cannot shape a rack's client links one by one (check_rack),
        // nor manage its queue (tc's codel would be another qdisc).
        Backend::Auto => !rack.is_rack() && !aqm && netem_available(&r),
    };
    let (backend_name, note, mut emulators) = if backend == Backend::None {
        if spec.shapes() {
            return Err(Invalid::from(
                "--emulator none forwards plainly: drop --rtt/--delay/--rate/--loss/--jitter",
            )
            .into());
        }
        (
            "none",
            "plain veth forwarding, asked for".to_string(),
            Vec::new(),
        )
    } else if netem {
        apply_netem(&r, spec)?;
        ("netem", "the kernel has netem".to_string(), Vec::new())
    } else {
        let why = match backend {
            Backend::Nfqueue => "asked for",
            _ if rack.is_rack() => "a rack shapes each client link on its own",
            _ => "netem is not in this kernel",
        };
        let (placed, cpu) = place(name, rack, spec, false)?;
        let note = format!("{why}{placed}");
        let e = start_emulators(name, &r, spec, rack.clients, cpu)?;
        ("nfqueue", note, e)
    };
    let owner_start_ticks = owner.and_then(state::start_ticks);
    let emulator = (!emulators.is_empty()).then(|| emulators.remove(0));
    let mut st = LabState {
        name: name.to_string(),
        spec: spec.clone(),
        backend: backend_name.to_string(),
        backend_note: note,
        client_ns: clients[0].ns.clone(),
        router_ns: r,
        server_ns: servers[0].ns.clone(),
        client_addr: clients[0].addr.clone(),
        server_addr: servers[0].addr.clone(),
        emulator,
        clients,
        servers,
        link_emulators: emulators,
        owner_pid: owner,
        owner_start_ticks,
        host_changes,
        calibration: None,
        created_at: crate::units::rfc3339_now(),
        tunnel: None,
        host_sysctls: Default::default(),
    };
    if let Err(e) = super::tunnel::attach(&mut st, spec.tunnel) {
        stop_emulators(&st.emulators());
        return Err(e);
    }
    if let Err(e) = state::save(&st) {
        stop_emulators(&st.emulators());
        super::tunnel::detach(&mut st);
        return Err(e);
    }
    Ok(st)
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// A namespace may only make a congestion control its default if the host
/// lists it in tcp_allowed_congestion_control (else EPERM; this kernel
/// allows "reno bbr"). Adds `cc` there when missing and says so: it widens
/// what every process may choose, host-wide, and changes nothing else.
fn allow_congestion_control(cc: &str) -> Result<Vec<String>, LabError> {
    let allowed = std::fs::read_to_string(ALLOWED_CC).map_err(|source| LabError::Io {
        path: ALLOWED_CC.into(),
        source,
    })?;
    if allowed.split_whitespace().any(|c| c == cc) {
        return Ok(vec![]);
    }
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if !avail.split_whitespace().any(|c| c == cc) {
        return Err(LabError::NoCc {
            cc: cc.into(),
            offers: avail.trim().into(),
        });
    }
    let new = format!("{} {cc}", allowed.trim());
    std::fs::write(ALLOWED_CC, &new).map_err(|source| LabError::AllowCc {
        cc: cc.into(),
        source,
    })?;
    Ok(vec![format!(
        "added {cc} to the host's net.ipv4.tcp_allowed_congestion_control (now \"{new}\") so the lab's namespaces may default to it"
    )])
}

/// netem on the router's egress: s0 carries client->server, c0 the reverse.
/// The queue limit (packets) stays above the path's BDP.
fn apply_netem(router: &str, spec: &LabSpec) -> Result<(), LabError> {
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

/// The emulator config of client link `link` (router device `c{link}`):
/// queue 2k for what enters from it (client->server), 2k+1 for what leaves
/// towards it (server->client); pinned to `cpu` when placed.
pub fn emulator_config(
    name: &str,
    spec: &LabSpec,
    link: usize,
    cpu: Option<usize>,
) -> emulator::Config {
    let q = 2 * link as u16;
    emulator::Config {
        queues: [q, q + 1],
        shaping: [super::spec::shaping(spec, 0), super::spec::shaping(spec, 1)],
        per_packet: spec.emulates_per_packet(),
        mtu: spec.mtu,
        stats: Some(state::emulator_stats_path(name, link)),
        seed: 0,
        cpu,
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
/// emulator's CPU must be one this process may use. `auto` places a busy
/// emulator: one per packet by request or for loss, or one that shapes a
/// rate (see [`placement_among`]). A slow link's emulator runs per packet
/// without asking (`LabSpec::emulates_per_packet`) and stays unplaced: its
/// few packets cost under a fifth of a core.
pub fn placement(spec: &LabSpec) -> Result<Option<Placement>, LabError> {
    placement_among(
        spec.emulator_cpu,
        busy(spec),
        &crate::measure::placement::allowed_cpus(),
    )
}

/// Whether `auto` places the emulator of `spec`: per packet by request or
/// for loss, or shaping a rate of at least `PER_PACKET_BELOW_BPS`.
fn busy(spec: &LabSpec) -> bool {
    let shaped = spec.links.iter().any(|l| {
        l.rate_bps
            .is_some_and(|r| r >= crate::model::lab::PER_PACKET_BELOW_BPS)
    });
    spec.per_packet || spec.has_loss() || shaped
}

/// `auto` places a busy emulator (`busy`) on the last allowed CPU and steers
/// the lab links' receive processing to the others, so the forwarding and
/// the receivers' TCP run on their own CPUs rather than inside the
/// emulator's verdict calls. Per packet it raised the capacity from 2.8-3.8
/// to 5.3-5.9 Gbit/s and cut its CPU at 1 Gbit/s from 39% to 24% of a core;
/// a GSO emulator shaping 1 Gbit/s went from 12% to 8% of a core (1.6 to
/// 1.1 µs per wire packet), at 10 Gbit/s from 45% to 32% with the same
/// throughput (bench/RESULTS.md, 2026-11-29). An unshaped GSO emulator (a
/// capacity lab) stays unplaced: there it lost capacity (36 against 49
/// Gbit/s), its few super-packets leaving a pinned CPU idle. An explicit CPU places either mode.
fn placement_among(
    choice: EmulatorCpu,
    busy: bool,
    allowed: &[usize],
) -> Result<Option<Placement>, LabError> {
    let emulator = match choice {
        EmulatorCpu::Off => return Ok(None),
        EmulatorCpu::Auto if allowed.len() < 2 || !busy => return Ok(None),
        EmulatorCpu::Auto => allowed[allowed.len() - 1],
        EmulatorCpu::Cpu(n) => {
            let n = n as usize;
            if !allowed.contains(&n) {
                return Err(LabError::CpuNotAllowed {
                    cpu: n,
                    allowed: crate::units::fmt_cpu_list(allowed),
                });
            }
            n
        }
    };
    let others = allowed.iter().copied().filter(|&c| c != emulator).collect();
    Ok(Some(Placement { emulator, others }))
}

/// Applies the placement of `spec` to the lab's links and returns what to
/// add to the backend note and the emulator's CPU. Without a placement the
/// links are left alone, or set back to unsteered when `reset` (a running
/// lab being reshaped). A rack's emulators (two clients or more) are never
/// placed and its links never steered: one CPU for N emulators would make
/// it their bottleneck, and the rest of a two-CPU machine too few.
fn place(
    name: &str,
    rack: Rack,
    spec: &LabSpec,
    reset: bool,
) -> Result<(String, Option<usize>), LabError> {
    if rack.clients > 1 {
        return Ok((
            format!(
                "; {} emulators, one per client link, left unplaced: --emulator-cpu places a one-client lab's emulator only",
                rack.clients
            ),
            None,
        ));
    }
    let mut ends = rack.veth_ends(name);
    ends.extend(super::link::extra_ends(name, spec.ports));
    let Some(p) = placement(spec)? else {
        if reset {
            steer(&ends, &[])?;
        }
        return Ok((String::new(), None));
    };
    steer(&ends, &p.others)?;
    let mut note = format!("; emulator on CPU {}", p.emulator);
    if !p.others.is_empty() {
        note.push_str(&format!(
            ", the lab's packet processing on CPU {} (RPS)",
            crate::units::fmt_cpu_list(&p.others)
        ));
    }
    Ok((note, Some(p.emulator)))
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
/// receive queue of every veth end: four in a one-server lab), so that a
/// packet the emulator releases is forwarded and delivered on another CPU,
/// not inside its verdict call.
fn steer(ends: &[(String, String)], cpus: &[usize]) -> Result<(), LabError> {
    let mask = if cpus.is_empty() {
        "0".to_string()
    } else {
        rps_mask(cpus)
    };
    for (ns, dev) in ends {
        let script = format!(
            "for q in /sys/class/net/{dev}/queues/rx-*/rps_cpus; do echo {mask} > \"$q\"; done"
        );
        in_ns(ns, "sh", &["-c", &script])?;
    }
    Ok(())
}

/// Hands each client link's traffic to its emulator's queues and starts
/// the emulators, link 0's first. A packet enters FORWARD once, so the first
/// matching rule decides: client->server by the port it came in on (`-i
/// c{k}`, queue 2k), server->client by the port it leaves by (`-o c{k}`,
/// queue 2k+1). (Client-to-client traffic in a rack meets its sender's
/// link only.) If one fails to start, those already running are stopped.
fn start_emulators(
    name: &str,
    router: &str,
    spec: &LabSpec,
    clients: usize,
    cpu: Option<usize>,
) -> Result<Vec<EmulatorState>, LabError> {
    for k in 0..clients {
        let dev = format!("c{k}");
        for (dir, q) in [("-i", 2 * k), ("-o", 2 * k + 1)] {
            in_ns(
                router,
                "iptables-legacy",
                &[
                    "-A",
                    "FORWARD",
                    dir,
                    &dev,
                    "-j",
                    "NFQUEUE",
                    "--queue-num",
                    &q.to_string(),
                ],
            )?;
        }
    }
    // Packets a queue discipline marked leave with ECN_MARK: set CE on them.
    // The rule stays whatever the discipline (a FIFO marks nothing), so a
    // study can switch --aqm by restarting the emulators alone.
    let mark = format!("{:#x}/{:#x}", emulator::ECN_MARK, emulator::ECN_MARK);
    in_ns(
        router,
        "iptables-legacy",
        &[
            "-t",
            "mangle",
            "-A",
            "POSTROUTING",
            "-m",
            "mark",
            "--mark",
            &mark,
            "-j",
            "TOS",
            "--set-tos",
            "0x03/0x03",
        ],
    )?;
    spawn_emulators(name, router, spec, clients, cpu)
}

/// Starts one emulator per client link (the rules stay as they are).
fn spawn_emulators(
    name: &str,
    router: &str,
    spec: &LabSpec,
    clients: usize,
    cpu: Option<usize>,
) -> Result<Vec<EmulatorState>, LabError> {
    let mut started: Vec<EmulatorState> = Vec::new();
    for k in 0..clients {
        match spawn_emulator(router, emulator_config(name, spec, k, cpu)) {
            Ok(e) => started.push(e),
            Err(e) => {
                stop_emulators(&started.iter().collect::<Vec<_>>());
                return Err(if clients > 1 {
                    LabError::OnLink {
                        source: Box::new(e),
                        link: k,
                    }
                } else {
                    e
                });
            }
        }
    }
    Ok(started)
}

/// Starts `linerate lab emulate` in the router namespace, in its own session
/// (it outlives `lab up`), and waits for its first counters: they are
/// written once both queues are bound.
pub fn spawn_emulator(router: &str, config: emulator::Config) -> Result<EmulatorState, LabError> {
    state::private_dir(state::STATE_DIR)?;
    let stats = config.stats.clone().expect("a stats path");
    let _ = std::fs::remove_file(&stats);
    // NAME.emulator.json logs to NAME.emulator.log, NAME.emulator2.json to NAME.emulator2.log.
    let log = stats.with_extension("log");
    let exe = std::env::current_exe().map_err(LabError::NoExe)?;
    let json = serde_json::to_string(&config).map_err(LabError::Json)?;
    let mut cmd = Command::new(exe);
    cmd.args(["lab", "emulate", "--config", &json]);
    let Daemon { pid, start_ticks } =
        start_daemon(cmd, router, "the emulator", &log, &stats, || {
            LabError::EmulatorSilent
        })?;
    Ok(EmulatorState {
        pid,
        start_ticks,
        stats,
        config,
    })
}

/// Stops an emulator we started (SIGTERM, then SIGKILL after 2 s).
pub fn stop_emulator(e: &EmulatorState) {
    stop_emulators(&[e]);
}

/// Stops emulators we started, together: SIGTERM to each (each checked by
/// PID and start time), then SIGKILL to any still running after 2 s.
pub fn stop_emulators(all: &[&EmulatorState]) {
    // Only a live linerate emulator, never whatever a state file names.
    let running = || {
        all.iter()
            .filter(|e| state::is_emulator(e.pid, e.start_ticks))
    };
    for e in running() {
        // SAFETY: signals a PID we checked is the emulator we started.
        unsafe { libc::kill(e.pid as i32, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while running().next().is_some() && Instant::now() < deadline {
        all.iter().for_each(|e| reap(e.pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut killed = false;
    for e in running() {
        // SAFETY: as above.
        unsafe { libc::kill(e.pid as i32, libc::SIGKILL) };
        killed = true;
    }
    if killed {
        std::thread::sleep(Duration::from_millis(20));
    }
    all.iter().for_each(|e| reap(e.pid));
}

/// Collects the exit status if the emulator is our child (the study's own lab).
fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: non-blocking wait on one PID; fails harmlessly if not our child.
    unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
}

/// Changes a running lab (a study's per-point axes): the links' MTU and
/// offloads and the hosts' congestion control in place; delay, jitter,
/// rate, queue and loss by restarting every emulator with the new spec.
/// Namespaces, addresses and rules stay.
pub fn reshape(st: &mut LabState, spec: &LabSpec) -> Result<(), LabError> {
    let rack = Rack::of(st);
    // A new tunnel, or the old one at a new MTU or over links built again:
    // checked first, taken down before the links change and set up again
    // after.
    let tunneled = spec.tunnel != crate::model::tunnel::TunnelKind::None;
    let retunnel = spec.tunnel != st.spec.tunnel
        || (tunneled && (spec.mtu != st.spec.mtu || spec.link != st.spec.link));
    if retunnel {
        super::tunnel::check_plan(spec.tunnel, rack.is_rack())?;
        super::tunnel::detach(st);
    }
    let hosts = st.host_namespaces();
    super::link::reshape(&st.name, &st.router_ns, rack.hosts(), &st.spec, spec)?;
    if spec.cc != st.spec.cc {
        let _ = allow_congestion_control(&spec.cc)?;
        for ns in &hosts {
            netns::sysctls(ns, &[("net.ipv4.tcp_congestion_control", spec.cc.clone())])?;
        }
    }
    let link_changed = spec.links != st.spec.links
        || spec.per_packet != st.spec.per_packet
        || spec.aqm != st.spec.aqm
        || spec.emulator_cpu != st.spec.emulator_cpu
        // The emulator's batching follows the MTU and offloads too.
        || spec.mtu != st.spec.mtu
        || spec.offloads != st.spec.offloads
        // Links built again: their RPS steering too.
        || spec.link != st.spec.link;
    if link_changed {
        match st.backend.as_str() {
            "netem" | "none" if spec.aqm.kind != crate::model::lab::AqmKind::Fifo => {
                return Err(Invalid::from(
                    "--aqm lives in the NFQUEUE emulator: this lab runs without it (lab down, then up with --aqm)",
                )
                .into())
            }
            "netem" => apply_netem(&st.router_ns, spec)?,
            "none" if spec.links != st.spec.links => return Err(LabError::FixedLink),
            "none" => {}
            _ => {
                stop_emulators(&st.emulators());
                let (placed, cpu) = place(&st.name, rack, spec, true)?;
                let why = st.backend_note.split("; ").next().unwrap_or("").to_string();
                st.backend_note = format!("{why}{placed}");
                let mut e = spawn_emulators(&st.name, &st.router_ns, spec, rack.clients, cpu)?;
                st.emulator = (!e.is_empty()).then(|| e.remove(0));
                st.link_emulators = e;
            }
        }
    }
    if retunnel {
        st.spec.mtu = spec.mtu;
        if let Err(e) = super::tunnel::attach(st, spec.tunnel) {
            // The lab is left clear, and says so.
            st.spec = LabSpec {
                tunnel: crate::model::tunnel::TunnelKind::None,
                ..spec.clone()
            };
            let _ = state::save(st);
            return Err(e);
        }
    }
    st.spec = spec.clone();
    st.calibration = None;
    state::save(st)
}

/// Takes lab `name` down: every emulator, every namespace (their links and
/// iptables rules go with them) and the state files. Namespaces are found
/// by name too (`lr-NAME-r`, `lr-NAME-c*`, `lr-NAME-s*`), so a lab whose
/// state file is gone, or a rack that failed halfway up, goes as well.
/// Safe to repeat.
pub fn down(name: &str) -> Result<bool, LabError> {
    check_name(name)?;
    let _lock = state::lock(name)?;
    down_locked(name)
}

/// `down` for a caller that holds the lab's lock.
fn down_locked(name: &str) -> Result<bool, LabError> {
    let st = state::load(name).ok().flatten();
    let mut namespaces = Vec::new();
    if let Some(s) = &st {
        stop_emulators(&s.emulators());
        namespaces = s.namespaces_all();
        let mut s = s.clone();
        super::tunnel::detach(&mut s);
        for (k, v) in &s.host_sysctls {
            match netns::host_sysctl(k, Some(v.clone())) {
                Ok(_) => eprintln!("lab {name}: put the host's {k} back to {v}"),
                Err(e) => eprintln!("lab {name}: cannot put the host's {k} back to {v}: {e}"),
            }
        }
    }
    for ns in netns::list() {
        if state::is_lab_namespace(name, &ns) && !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    // A userspace tunnel whose state was lost lives on in its namespace.
    super::tunnel::stop_strays(&namespaces);
    let mut found = st.is_some();
    for ns in namespaces {
        if netns::exists(&ns) {
            found = true;
            sh("ip", &["netns", "del", &ns])?;
        }
    }
    // NAME.json and NAME.emulator*.json / .log (lab names hold no '.').
    let prefix = format!("{name}.");
    for e in std::fs::read_dir(state::STATE_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
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
    pub fn up(name: &str, spec: &LabSpec, backend: Backend) -> Result<OwnedLab, LabError> {
        let state = up(
            name,
            spec,
            Rack::default(),
            backend,
            Some(std::process::id()),
        )?;
        Ok(OwnedLab { state })
    }
}

impl Drop for OwnedLab {
    fn drop(&mut self) {
        let _ = down(&self.state.name);
    }
}

#[cfg(test)]
mod tests;
