//! The links between a lab's host namespaces and its router (`lab up
//! --link`, the `lab.link` axis), and the server's extra ports (`lab up
//! --ports N`).
//!
//! Every link ends in the host namespace as `lr0` (the server's extra
//! ports as `lr1`, `lr2`...) and in the router namespace as the device that
//! holds the router's address: `c{k}`, `s{j}`, `s0p{i}`. The NFQUEUE rules
//! (`-i c{k}`, `-o c{k}`) name that device, so whatever the kind of link,
//! the emulator sees every packet the router forwards: routing happens on
//! the device with the address, whatever sits below it.
//!
//! ```text
//!  veth:    host lr0 ==veth== router c0 (198.18.0.254)
//!  bridge:  host lr0 ==veth== router c0v -> bridge c0 (198.18.0.254)
//!  macvlan: host lr0 (macvlan) -. parent pc0 (veth, peer pc0x) .- router c0 (macvlan)
//! ```
//!
//! bridge: the bridge sits in the router namespace, between the veth end
//! (its only port) and the router's IP layer; frames from a host cross it
//! (L2: FDB lookup, local delivery to the bridge's own address) and are
//! then routed, so `iptables FORWARD -i c0` matches the bridge device.
//! br_netfilter is not needed (no frame is bridged between two ports; this
//! kernel has no /proc/sys/net/bridge until the module is loaded, and the
//! lab does not load it).
//!
//! macvlan: the host's device and the router's are two macvlan devices in
//! bridge mode on one parent, a veth (`p{dev}`, its peer `p{dev}x` up
//! beside it so the parent has carrier) in the router namespace; the host's
//! is made there and moved into the host's namespace. Unicast between
//! them is switched inside macvlan without reaching the parent's wire.
//! (A `dummy` parent would do as well, but this kernel has no dummy links.)
//!
//! Server ports: port `i` (1..N) of server 0 is a link of its own, server
//! `lr{i}` 198.19.{i}.1, router `s0p{i}` 198.19.{i}.254; the server answers
//! from each address over its own port (a routing rule per source address),
//! so a flow to port `i` crosses that link both ways. Ports are not shaped:
//! the emulator shapes the client link, as for a rack's servers.

use super::plumb::{in_ns, ip, sh};
use super::state;
use super::LabError;
use crate::model::lab::{LabSpec, LinkKind};
use crate::model::Invalid;

/// One link of the lab, as wired: the host's end and the router's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub host_ns: String,
    pub host_dev: String,
    /// The router's device with the address (what iptables rules name).
    pub router_dev: String,
    pub host_addr: String,
    pub router_addr: String,
    /// The host's routing table for this port's source address (extra
    /// server ports); None: the host's default route goes this way.
    pub table: Option<u32>,
    /// The direction the host sends in: 0 a client (client->server), 1 a
    /// server; the index of its NIC's rate in `LabSpec::nic_bps`.
    pub egress: usize,
}

/// The address of server port `i` (0: the server's own, 198.18.1.1).
pub fn server_port_addr(i: u32) -> String {
    if i == 0 {
        state::server_addr(0)
    } else {
        format!("198.19.{i}.1")
    }
}

/// Every data address of server 0, port 0 first.
pub fn server_port_addrs(ports: u32) -> Vec<String> {
    (0..ports.max(1)).map(server_port_addr).collect()
}

/// How many clients and servers a lab has (topology's `Rack`, passed as
/// counts so this file needs nothing of topology.rs, which calls it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hosts {
    pub clients: usize,
    pub servers: usize,
}

impl Default for Hosts {
    fn default() -> Self {
        Hosts {
            clients: 1,
            servers: 1,
        }
    }
}

/// Every link of a lab: each client's, each server's, then server 0's
/// extra ports.
pub fn ports(name: &str, rack: Hosts, server_ports: u32) -> Vec<Port> {
    let mut v = Vec::new();
    for k in 0..rack.clients {
        v.push(Port {
            host_ns: state::client_ns(name, k),
            host_dev: "lr0".into(),
            router_dev: format!("c{k}"),
            host_addr: state::client_addr(k),
            router_addr: state::router_client_addr(k),
            table: None,
            egress: 0,
        });
    }
    for j in 0..rack.servers {
        v.push(Port {
            host_ns: state::server_ns(name, j),
            host_dev: "lr0".into(),
            router_dev: format!("s{j}"),
            host_addr: state::server_addr(j),
            router_addr: state::router_server_addr(j),
            table: None,
            egress: 1,
        });
    }
    for i in 1..server_ports.max(1) {
        v.push(Port {
            host_ns: state::server_ns(name, 0),
            host_dev: format!("lr{i}"),
            router_dev: format!("s0p{i}"),
            host_addr: server_port_addr(i),
            router_addr: format!("198.19.{i}.254"),
            table: Some(100 + i),
            egress: 1,
        });
    }
    v
}

/// The server's extra ports' ends (namespace, device), for RPS steering.
pub fn extra_ends(name: &str, server_ports: u32) -> Vec<(String, String)> {
    let r = state::router_ns(name);
    ports(name, Hosts::default(), server_ports)
        .into_iter()
        .filter(|p| p.table.is_some())
        .flat_map(|p| [(p.host_ns, p.host_dev), (r.clone(), p.router_dev)])
        .collect()
}

/// What a lab with server ports cannot be, said before anything is built.
pub fn check(spec: &LabSpec, rack: Hosts, netem: bool) -> Result<(), LabError> {
    if spec.ports > 1 && rack.servers > 1 {
        return Err(Invalid(format!(
            "--ports {} gives server 0 more addresses; a rack of {} servers already has one each: use one or the other",
            spec.ports, rack.servers
        ))
        .into());
    }
    if spec.ports > 1 && netem {
        return Err(Invalid::from(
            "--emulator netem shapes the router's s0 only; traffic to the other ports would pass unshaped: use --emulator nfqueue (or auto)",
        )
        .into());
    }
    Ok(())
}

/// The devices in the router that carry a link below the router's device:
/// they take the MTU before the ends (a macvlan's MTU may not exceed its
/// parent's) and the offloads with them.
fn underlay(kind: LinkKind, p: &Port) -> Vec<String> {
    match kind {
        LinkKind::Veth => vec![],
        LinkKind::Bridge => vec![format!("{}v", p.router_dev)],
        LinkKind::Macvlan => vec![format!("p{}", p.router_dev), format!("p{}x", p.router_dev)],
    }
}

/// Bytes a token bucket lets through at once: three 64 KiB GSO units (a
/// bucket smaller than a unit would cut units into segments, and one flow
/// reached 9.09-9.20 Gbit/s of 10 through this one).
const NIC_BURST: u64 = 3 * 65_536;

/// `tc qdisc replace` arguments after `dev DEV root` that make a host's
/// end of a link a NIC of `wire_bps` (wire bits/s, 38 B framing per frame
/// counted, as `--rate`) at `mtu`: a token bucket (tbf).
///
/// tbf counts a packet's length with its 14-byte Ethernet header and, for
/// a GSO unit, each segment's headers, but not the preamble, FCS and gap
/// the wire adds: its rate is the wire rate times (mtu + 14) / (mtu + 38),
/// so full-size frames leave at exactly the wire's rate. Its queue holds
/// 10 ms at the rate, at least 1 MiB (the kernel's per-socket limit on
/// bytes below TCP keeps one flow far under it).
pub fn tbf_args(wire_bps: f64, mtu: u32) -> Vec<String> {
    let m = f64::from(mtu);
    let rate = (wire_bps * (m + 14.0) / (m + 38.0)).round().max(8.0) as u64;
    let limit = (rate / 8 / 100).max(1 << 20) + NIC_BURST;
    vec![
        "tbf".into(),
        "rate".into(),
        format!("{rate}bit"),
        "burst".into(),
        NIC_BURST.to_string(),
        "limit".into(),
        limit.to_string(),
    ]
}

/// Gives the host's end of link `p` its NIC (`--nic-rate`), or takes it
/// away (`had`: the end has one from an earlier spec).
fn nic(p: &Port, spec: &LabSpec, had: bool) -> Result<(), LabError> {
    let dev = p.host_dev.as_str();
    match spec.nic_bps {
        Some(bps) => {
            let mut a = vec!["-n", &p.host_ns, "qdisc", "replace", "dev", dev, "root"];
            let tbf = tbf_args(bps[p.egress], spec.mtu);
            a.extend(tbf.iter().map(String::as_str));
            sh("tc", &a).map(drop)
        }
        None if had => sh(
            "tc",
            &["-n", &p.host_ns, "qdisc", "del", "dev", dev, "root"],
        )
        .map(drop),
        None => Ok(()),
    }
}

fn offloads(ns: &str, dev: &str, on: bool) -> Result<(), LabError> {
    let v = if on { "on" } else { "off" };
    in_ns(ns, "ethtool", &["-K", dev, "tso", v, "gso", v, "gro", v]).map(drop)
}

/// Makes the devices of link `p` (not yet addressed; the underlay up at
/// `spec.mtu` with the lab's offloads).
fn make(kind: LinkKind, p: &Port, router: &str, spec: &LabSpec) -> Result<(), LabError> {
    let mtu = spec.mtu.to_string();
    let (h, d) = (p.host_dev.as_str(), p.router_dev.as_str());
    match kind {
        LinkKind::Veth => {
            ip(
                &p.host_ns,
                &[
                    "link", "add", h, "type", "veth", "peer", "name", d, "netns", router,
                ],
            )?;
        }
        LinkKind::Bridge => {
            let port = format!("{d}v");
            ip(
                &p.host_ns,
                &[
                    "link", "add", h, "type", "veth", "peer", "name", &port, "netns", router,
                ],
            )?;
            ip(router, &["link", "add", d, "type", "bridge"])?;
            ip(router, &["link", "set", "dev", &port, "master", d])?;
        }
        LinkKind::Macvlan => {
            let parent = format!("p{d}");
            let peer = format!("p{d}x");
            ip(
                router,
                &[
                    "link", "add", &parent, "type", "veth", "peer", "name", &peer,
                ],
            )?;
            ip(
                router,
                &[
                    "link", "add", d, "link", &parent, "type", "macvlan", "mode", "bridge",
                ],
            )?;
            // Made in the router (beside its parent), then moved and named.
            let tmp = format!("{d}h");
            ip(
                router,
                &[
                    "link", "add", &tmp, "link", &parent, "type", "macvlan", "mode", "bridge",
                ],
            )?;
            ip(router, &["link", "set", "dev", &tmp, "netns", &p.host_ns])?;
            ip(&p.host_ns, &["link", "set", "dev", &tmp, "name", h])?;
        }
    }
    for u in underlay(kind, p) {
        ip(router, &["link", "set", "dev", &u, "mtu", &mtu, "up"])?;
        if !spec.offloads {
            offloads(router, &u, false)?;
        }
    }
    Ok(())
}

/// Builds link `p` of kind `spec.link` and wires it: addresses, MTU,
/// offloads, up, and the host's route through it.
pub fn wire(p: &Port, router: &str, spec: &LabSpec) -> Result<(), LabError> {
    make(spec.link, p, router, spec)?;
    let mtu = spec.mtu.to_string();
    for (ns, dev, addr) in [
        (p.host_ns.as_str(), p.host_dev.as_str(), &p.host_addr),
        (router, p.router_dev.as_str(), &p.router_addr),
    ] {
        ip(ns, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
        ip(ns, &["link", "set", "dev", dev, "mtu", &mtu, "up"])?;
        if !spec.offloads {
            offloads(ns, dev, false)?;
        }
    }
    nic(p, spec, false)?;
    match p.table {
        None => ip(
            &p.host_ns,
            &["route", "add", "default", "via", &p.router_addr],
        )
        .map(drop),
        Some(t) => {
            let t = t.to_string();
            ip(
                &p.host_ns,
                &["rule", "add", "from", &p.host_addr, "table", &t],
            )?;
            ip(
                &p.host_ns,
                &[
                    "route",
                    "add",
                    "default",
                    "via",
                    &p.router_addr,
                    "dev",
                    &p.host_dev,
                    "table",
                    &t,
                ],
            )
            .map(drop)
        }
    }
}

fn has(ns: &str, dev: &str) -> bool {
    sh("ip", &["-n", ns, "link", "show", "dev", dev]).is_ok()
}

/// Removes link `p` of kind `kind` (every device it made; the host's
/// routing rule goes too). Devices already gone are skipped.
fn remove(kind: LinkKind, p: &Port, router: &str) -> Result<(), LabError> {
    if let Some(t) = p.table {
        let _ = ip(
            &p.host_ns,
            &["rule", "del", "from", &p.host_addr, "table", &t.to_string()],
        );
    }
    let mut devs = vec![(p.host_ns.clone(), p.host_dev.clone())];
    devs.push((router.to_string(), p.router_dev.clone()));
    devs.extend(
        underlay(kind, p)
            .into_iter()
            .map(|u| (router.to_string(), u)),
    );
    for (ns, dev) in devs {
        if has(&ns, &dev) {
            ip(&ns, &["link", "del", "dev", &dev])?;
        }
    }
    Ok(())
}

/// Reshapes the links of a running lab from `old` to `new`: the kind by
/// taking every link down and building it again (addresses and routes
/// too); else MTU (underlays first) and offloads in place.
pub fn reshape(
    name: &str,
    router: &str,
    rack: Hosts,
    old: &LabSpec,
    new: &LabSpec,
) -> Result<(), LabError> {
    if new.ports != old.ports {
        return Err(Invalid(format!(
            "this lab has {} server ports; a point cannot change them (lab up --ports, or the study's [lab] ports)",
            old.ports
        ))
        .into());
    }
    let all = ports(name, rack, old.ports);
    if new.link != old.link {
        for p in &all {
            remove(old.link, p, router)?;
            wire(p, router, new)?;
        }
        return Ok(());
    }
    let mut ends: Vec<(String, String)> = Vec::new();
    for p in &all {
        ends.extend(
            underlay(new.link, p)
                .into_iter()
                .map(|u| (router.to_string(), u)),
        );
    }
    let underlays = ends.len();
    for p in &all {
        ends.push((p.host_ns.clone(), p.host_dev.clone()));
        ends.push((router.to_string(), p.router_dev.clone()));
    }
    if new.mtu != old.mtu {
        let mtu = new.mtu.to_string();
        // Lowering: the ends first (a macvlan's MTU above its parent's is refused).
        let order: Vec<&(String, String)> = if new.mtu < old.mtu {
            ends[underlays..].iter().chain(&ends[..underlays]).collect()
        } else {
            ends.iter().collect()
        };
        for (ns, dev) in order {
            ip(ns, &["link", "set", "dev", dev, "mtu", &mtu])?;
        }
    }
    if new.offloads != old.offloads {
        for (ns, dev) in &ends {
            offloads(ns, dev, new.offloads)?;
        }
    }
    // The bucket's rate follows the MTU (see `tbf_args`).
    if new.nic_bps != old.nic_bps || (new.nic_bps.is_some() && new.mtu != old.mtu) {
        for p in &all {
            nic(p, new, old.nic_bps.is_some())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ports_have_their_own_subnets_and_tables() {
        let p = ports("x", Hosts::default(), 3);
        assert_eq!(p.len(), 4);
        assert_eq!(
            (p[1].host_dev.as_str(), p[1].router_dev.as_str()),
            ("lr0", "s0")
        );
        assert_eq!(p[3].host_addr, "198.19.2.1");
        assert_eq!(p[3].router_addr, "198.19.2.254");
        assert_eq!(p[3].router_dev, "s0p2");
        assert_eq!(p[3].table, Some(102));
        assert_eq!(
            server_port_addrs(3),
            vec!["198.18.1.1", "198.19.1.1", "198.19.2.1"]
        );
        assert_eq!(server_port_addrs(1), vec!["198.18.1.1"]);
        assert_eq!(extra_ends("x", 2).len(), 2);
    }

    #[test]
    fn a_nic_counts_what_tbf_counts_and_fits_a_gso_unit() {
        // 10 Gbit/s of wire at MTU 1500: 1514 of every 1538 wire bytes.
        let a = tbf_args(10e9, 1500);
        assert_eq!(a[..3], ["tbf", "rate", "9843953186bit"]);
        // The bucket holds three 64 KiB units; the queue 10 ms at the rate.
        assert_eq!(a[4], "196608");
        assert_eq!(a[6], (9_843_953_186u64 / 800 + 196_608).to_string());
        // A slow NIC's queue is at least 1 MiB.
        let a = tbf_args(10e6, 1500);
        assert_eq!(a[6], ((1u64 << 20) + 196_608).to_string());
        // At MTU 9000 the framing is a smaller share.
        assert_eq!(tbf_args(1e9, 9000)[2], "997344545bit");
        // Clients send client->server, servers (and their ports) the other way.
        let p = ports("x", Hosts::default(), 2);
        assert_eq!(p.iter().map(|p| p.egress).collect::<Vec<_>>(), [0, 1, 1]);
    }

    #[test]
    fn underlays_by_kind_and_names_fit_ifnamsiz() {
        // Client, server, then the server's seven further ports.
        let all = ports("x", Hosts::default(), 8);
        assert_eq!(all.len(), 9);
        let p = &all[8];
        assert!(underlay(LinkKind::Veth, p).is_empty());
        assert_eq!(underlay(LinkKind::Bridge, p), vec!["s0p7v"]);
        assert_eq!(underlay(LinkKind::Macvlan, p), vec!["ps0p7", "ps0p7x"]);
        for k in [LinkKind::Bridge, LinkKind::Macvlan] {
            assert!(underlay(k, p).iter().all(|d| d.len() < 16));
        }
    }

    #[test]
    fn ports_refuse_a_rack_of_servers_and_netem() {
        let spec = LabSpec {
            ports: 2,
            ..LabSpec::default()
        };
        let h = |clients, servers| Hosts { clients, servers };
        assert!(check(&spec, h(2, 2), false).is_err());
        assert!(check(&spec, h(4, 1), false).is_ok());
        assert!(check(&spec, Hosts::default(), true).is_err());
        assert!(check(&LabSpec::default(), h(1, 3), true).is_ok());
    }
}
