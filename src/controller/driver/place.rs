//! Where each flow runs: which members a test uses, and flow i on client
//! i mod C to server address i mod A. One rule for a fleet and for one
//! agent (C = 1, and A its control address or `--ports N` of its own).

use std::net::IpAddr;

use super::{Driver, Member, Role};
use crate::controller::error::ControllerError;
use crate::model::result::FlowPlace;
use crate::model::spec::TestSpec;

/// One flow's place: its client, its server and the server address.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Place {
    pub(super) flow: u32,
    pub(super) client: usize,
    pub(super) server: usize,
    pub(super) addr: IpAddr,
}

/// Flow i goes to client i mod C and to server address i mod A (the server
/// addresses of every server, in order): `--flows` is the total.
pub(super) fn plan(flows: u32, clients: usize, addrs: &[(usize, IpAddr)]) -> Vec<Place> {
    (0..flows)
        .map(|i| {
            let (server, addr) = addrs[i as usize % addrs.len()];
            Place {
                flow: i,
                client: i as usize % clients,
                server,
                addr,
            }
        })
        .collect()
}

/// The data addresses a server listens on for `spec`: the first
/// `spec.ports` of its pool, else its own (empty: its control address;
/// one agent with `--ports 1` stays there too).
pub(super) fn listen<'a>(m: &'a Member, spec: &TestSpec) -> &'a [IpAddr] {
    match spec.ports {
        Some(n) if !(m.data.is_empty() && n <= 1) => &m.pool[..(n as usize).min(m.pool.len())],
        _ => &m.data,
    }
}

impl Driver {
    /// Every server data address a test of `spec` uses, in order: (member
    /// index, address); a server without its own is reached at its
    /// control address.
    pub(super) fn server_addrs(&self, spec: &TestSpec) -> Vec<(usize, IpAddr)> {
        self.indices(Role::Server)
            .into_iter()
            .flat_map(|i| {
                let m = &self.members[i];
                let own = listen(m, spec);
                match (own.is_empty(), m.control()) {
                    (true, Some(c)) => vec![(i, c.ip())],
                    _ => own.iter().map(|a| (i, *a)).collect(),
                }
            })
            .collect()
    }

    pub(super) fn plan(&self, spec: &TestSpec) -> Vec<Place> {
        let clients = self.indices(Role::Client);
        plan(spec.flows, clients.len(), &self.server_addrs(spec))
            .into_iter()
            .map(|p| Place {
                client: clients[p.client],
                ..p
            })
            .collect()
    }

    /// Which client, server and address each flow of `spec` uses (a fleet
    /// of one records none: every flow is this process's, to its agent).
    pub fn flow_map(&self, spec: &TestSpec) -> Vec<FlowPlace> {
        if !self.hosts {
            return Vec::new();
        }
        let Ok(active) = self.active(spec) else {
            return Vec::new();
        };
        let clients: Vec<usize> = self
            .indices(Role::Client)
            .into_iter()
            .filter(|&i| active[i])
            .collect();
        let addrs: Vec<(usize, IpAddr)> = self
            .server_addrs(spec)
            .into_iter()
            .filter(|(i, _)| active[*i])
            .collect();
        if clients.is_empty() || addrs.is_empty() {
            return Vec::new();
        }
        plan(spec.flows, clients.len(), &addrs)
            .into_iter()
            .map(|p| {
                let (c, s) = (&self.members[clients[p.client]], &self.members[p.server]);
                FlowPlace {
                    flow: p.flow,
                    client: c.name.clone(),
                    server: s.name.clone(),
                    address: p.addr.to_string(),
                    placement: placement(c, s, p.addr),
                }
            })
            .collect()
    }

    /// Which members a test of `spec` uses: the first `spec.clients`
    /// clients (all without it), and of those and of the servers only the
    /// ones that get a flow (8 clients and 2 flows: d1 and d2 run them).
    pub(super) fn active(&self, spec: &TestSpec) -> Result<Vec<bool>, ControllerError> {
        let clients = self.indices(Role::Client).len();
        let want = spec.clients.map_or(clients, |n| n as usize);
        if want == 0 || want > clients {
            return Err(ControllerError::Clients {
                want,
                have: clients,
            });
        }
        if let Some(n) = spec.ports {
            let short = self.members.iter().find(|m| {
                m.role == Role::Server
                    && listen(m, spec).len() < n as usize
                    && !(m.data.is_empty() && n <= 1)
            });
            if let Some(m) = short {
                return Err(match self.hosts {
                    true => ControllerError::FewPorts {
                        ports: n,
                        server: m.name.clone(),
                        addrs: m.pool.clone(),
                    },
                    false => ControllerError::OnePort(n, m.pool.len().max(1)),
                });
            }
        }
        let flows = spec.flows as usize;
        let mut client_rank = 0;
        let mut first_addr = 0;
        Ok(self
            .members
            .iter()
            .map(|m| match m.role {
                Role::Client => {
                    client_rank += 1;
                    client_rank <= want.min(flows)
                }
                Role::Server => {
                    let uses = first_addr < flows;
                    first_addr += listen(m, spec).len().max(1);
                    uses
                }
            })
            .collect())
    }
}

/// Where a flow's two ends are against each other, from their hosts'
/// `site` (none without a node on both): same or other node (and zone),
/// the client's network, and what the flow connects to: "other node, pod
/// -> service 198.19.100.7".
fn placement(c: &Member, s: &Member, addr: IpAddr) -> Option<String> {
    let (cn, sn) = (c.site.get("node")?, s.site.get("node")?);
    let zone = match (c.site.get("zone"), s.site.get("zone")) {
        (Some(a), Some(b)) if a != b => ", other zone",
        _ => "",
    };
    let near = if cn == sn { "same node" } else { "other node" };
    let net = |m: &Member| {
        m.site
            .get("network")
            .cloned()
            .unwrap_or_else(|| "host".into())
    };
    let to = match s.via(addr) {
        Some(via) => format!("service {via}"),
        None => net(s),
    };
    Some(format!("{near}{zone}, {} -> {to}", net(c)))
}
