//! `linerate lab ...`: bring a lab up, show it, take it down; and the hidden
//! `lab emulate` that `lab up` starts inside the router namespace.

use clap::{Args, Subcommand};

use crate::engine::signals;
use crate::error::{Error, Result};

use crate::lab::calibrate;
use crate::lab::emulator;
use crate::lab::spec::LabOptions;
use crate::lab::state;
use crate::lab::topology::{self, Backend, Rack};

#[derive(Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Create lab NAME (client, router, server namespaces; --clients/--servers for a rack) with this link, and calibrate it.
    Up(Box<UpArgs>),
    /// Remove lab NAME: emulator, namespaces, links and rules (safe to repeat).
    Down(DownArgs),
    /// Show the labs that are up, their links, emulator counters and last calibration.
    Status(StatusArgs),
    /// The emulator process of a lab (started by `lab up` in the router namespace).
    #[command(hide = true)]
    Emulate(EmulateArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmulatorArg {
    /// netem if the kernel has it, else the NFQUEUE delay element.
    Auto,
    Nfqueue,
    Netem,
    /// No emulator: plain veth forwarding through the router (a baseline).
    None,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// The lab's name (a-z, 0-9, -).
    pub name: String,
    #[command(flatten)]
    pub link: LabOptions,
    /// Which emulator applies the link.
    #[arg(long, value_enum, default_value = "auto")]
    pub emulator: EmulatorArg,
    /// Skip the calibration (RTT and bulk rate) after the lab is up.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Client namespaces (1-16), each joined to the router by a link of its
    /// own that the emulator shapes with this link's settings (a rack).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub clients: usize,
    /// Server namespaces (1-8), each on an unshaped link to the router.
    #[arg(long, default_value_t = 1, value_name = "M")]
    pub servers: usize,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// The lab's name.
    pub name: String,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// One lab (default: all).
    pub name: Option<String>,
    /// Print the state as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct EmulateArgs {
    /// The emulator's configuration as JSON (see lab::emulator::Config).
    #[arg(long)]
    pub config: String,
}

fn need_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::Failed(
            "the lab creates network namespaces: run as root (or under sudo)".to_string(),
        ));
    }
    Ok(())
}

fn up(a: UpArgs) -> Result<()> {
    topology::check_name(&a.name)?;
    let spec = a.link.build()?;
    let rack = Rack::new(a.clients, a.servers)?;
    let backend = match a.emulator {
        EmulatorArg::Auto => Backend::Auto,
        EmulatorArg::Nfqueue => Backend::Nfqueue,
        EmulatorArg::Netem => Backend::Netem,
        EmulatorArg::None => Backend::None,
    };
    topology::check_rack(&spec, rack, backend)?;
    need_root()?;
    let st = topology::up(&a.name, &spec, rack, backend, None)?;
    println!("lab {} is up: {}", st.name, st.spec.describe());
    if st.spec.default_queue() {
        println!("  queue: {}", crate::model::lab::DEFAULT_QUEUE_WHY);
    }
    for c in &st.host_changes {
        println!("  note: {c}");
    }
    if rack.is_rack() {
        let n =
            |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        println!(
            "  a rack of {} and {}, emulator {} ({})",
            n(
                rack.clients,
                "client (its link shaped)",
                "clients (each link shaped)"
            ),
            n(
                rack.servers,
                "server (its link not shaped)",
                "servers (links not shaped)"
            ),
            st.backend,
            st.backend_note
        );
        print_hosts(&st);
    } else {
        println!(
            "  client {} in {}, server {} in {}, emulator {} ({})",
            st.client_addr, st.client_ns, st.server_addr, st.server_ns, st.backend, st.backend_note
        );
    }
    print_tunnel(&st);
    if !a.no_calibrate {
        let rate = st.spec.links[0].rate_bps.is_some();
        let expect = calibrate::expected_s(&st, rate);
        if expect > 5.0 {
            println!(
                "  calibrating the RTT{}: about {expect:.0} s (--no-calibrate skips it)",
                if rate { " and the rate" } else { "" }
            );
        }
        match calibrate::calibrate(&st, rate) {
            Ok(c) => {
                let mut st = st.clone();
                st.calibration = Some(c.clone());
                state::save(&st)?;
                println!("  calibration: {}", c.describe());
                for w in &c.warnings {
                    println!("  warning: {w}");
                }
            }
            Err(e) => {
                let _ = topology::down(&st.name);
                return Err(Error::Failed(format!(
                    "{e}; lab {} taken down again",
                    st.name
                )));
            }
        }
    }
    println!(
        "  run tests with: linerate run stream --lab {0}   take it down with: linerate lab down {0}",
        st.name
    );
    Ok(())
}

fn down(a: DownArgs) -> Result<()> {
    topology::check_name(&a.name)?;
    need_root()?;
    if topology::down(&a.name)? {
        println!("lab {} is down", a.name);
    } else {
        println!("lab {} was not up (nothing to remove)", a.name);
    }
    Ok(())
}

/// One line per role: `clients: 198.18.0.1 in lr-x-c, 198.18.2.1 in lr-x-c2`.
fn print_hosts(st: &state::LabState) {
    for (role, hosts) in [
        ("clients", st.client_hosts()),
        ("servers", st.server_hosts()),
    ] {
        let list: Vec<String> = hosts
            .iter()
            .map(|h| format!("{} in {}", h.addr, h.ns))
            .collect();
        println!("  {role}: {}", list.join(", "));
    }
}

/// The tunnel line: kind, implementation, cipher, MTU, and its addresses.
fn print_tunnel(st: &state::LabState) {
    if let Some(t) = &st.tunnel {
        let i = &t.info;
        println!(
            "  tunnel {}: inner {} <-> {} over {} <-> {}{}",
            i.describe(),
            i.client_inner,
            i.server_inner,
            i.client_outer,
            i.server_outer,
            if t.procs.is_empty() {
                String::new()
            } else {
                let pids: Vec<String> = t.procs.iter().map(|p| p.pid.to_string()).collect();
                format!(", processes {}", pids.join(" and "))
            }
        );
    }
}

/// Every emulator of a lab with its latest counters, for `status --json`.
fn emulators_json(s: &state::LabState) -> Vec<serde_json::Value> {
    let clients = s.client_hosts();
    s.emulators()
        .into_iter()
        .enumerate()
        .map(|(k, e)| {
            serde_json::json!({
                "link": k,
                "device": format!("c{k}"),
                "client_ns": clients.get(k).map(|h| h.ns.clone()),
                "pid": e.pid,
                "stats": e.read_stats(),
            })
        })
        .collect()
}

fn status(a: StatusArgs) -> Result<()> {
    let names = match &a.name {
        Some(n) => vec![n.clone()],
        None => state::list(),
    };
    let mut all = Vec::new();
    for n in names {
        match state::load(&n)? {
            Some(s) => all.push(s),
            None => return Err(Error::Failed(format!("no lab named {n} is up"))),
        }
    }
    if a.json {
        let stats: Vec<_> = all
            .iter()
            .map(|s| {
                serde_json::json!({
                    "lab": s,
                    "clients": s.client_hosts(),
                    "servers": s.server_hosts(),
                    "namespaces": s.namespaces_all(),
                    "emulator_stats": s.emulator_stats(),
                    "emulators": emulators_json(s),
                    "tunnel": s.tunnel.as_ref().map(|t| serde_json::json!({
                        "info": t.info,
                        "processes": t.procs,
                        "counters": crate::lab::tunnel::counters(s),
                        "alive": s.tunnel_alive(),
                    })),
                    "stale": s.is_stale(),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&stats).unwrap_or_default()
        );
        return Ok(());
    }
    if all.is_empty() {
        println!("no lab is up (start one with: linerate lab up wan --rtt 50ms --rate 1gbit)");
    }
    for s in &all {
        let health = if s.is_stale() {
            "STALE: its emulator or owner is gone; `lab down` removes it"
        } else {
            "up"
        };
        println!(
            "lab {} ({health}, since {}): {}",
            s.name,
            s.created_at,
            s.spec.describe()
        );
        if s.spec.default_queue() {
            println!("  queue: {}", crate::model::lab::DEFAULT_QUEUE_WHY);
        }
        print_hosts(s);
        print_tunnel(s);
        println!("  emulator {} ({})", s.backend, s.backend_note);
        let rack = s.emulators().len() > 1;
        let clients = s.client_hosts();
        for (k, e) in s.emulators().into_iter().enumerate() {
            let Some(st) = e.read_stats() else { continue };
            // A one-client lab prints as it always did; a rack names each link.
            let indent = if rack {
                let ns = clients.get(k).map_or("?", |h| h.ns.as_str());
                println!("  link c{k} ({ns}):");
                "    "
            } else {
                "  "
            };
            for (d, name) in [(0, "client->server"), (1, "server->client")] {
                let x = &st.dirs[d];
                println!(
                    "{indent}{name}: {} packets, {} dropped by loss, {} by the queue, max queue {}{}",
                    x.packets,
                    x.dropped_loss,
                    x.dropped_queue,
                    crate::units::fmt_bytes(x.max_queue_bytes),
                    x.aqm_phrase()
                );
            }
            println!(
                "{indent}emulator pid {}, cpu {:.2} s over {:.0} s",
                st.pid, st.cpu_s, st.uptime_s
            );
        }
    }
    Ok(())
}

pub fn lab(args: LabArgs) -> Result<()> {
    match args.command {
        LabCommand::Up(a) => up(*a),
        LabCommand::Down(a) => down(a),
        LabCommand::Status(a) => status(a),
        LabCommand::Emulate(a) => {
            let cfg: emulator::Config = serde_json::from_str(&a.config)
                .map_err(|e| Error::Failed(format!("lab emulate: bad --config: {e}")))?;
            // SIGTERM and SIGINT end the emulator cleanly (final counters written).
            signals::on_signals(&[libc::SIGTERM, libc::SIGINT], false);
            emulator::run(&cfg, signals::raised()).map_err(Into::into)
        }
    }
}
