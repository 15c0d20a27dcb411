//! The hosts file (`--hosts hosts.toml`): the machines a controller drives,
//! how to reach each one's agent (control address and port, token), its
//! data addresses (one per port/NIC), its role, and how to log in over SSH
//! to start the agent (`linerate cluster up`).
//!
//! ```toml
//! [defaults]
//! port = 7470                    # agents' control port
//! ssh_user = "root"
//! ssh_options = ["-i", "/home/me/.ssh/lab_ed25519"]
//!
//! [[host]]
//! name = "sut"
//! address = "10.0.0.1"           # where the agent listens for controllers
//! data = ["10.0.0.1", "10.0.1.1"]  # its ports; default: [address]
//! role = "server"
//!
//! [[host]]
//! name = "d1"
//! address = "10.0.0.11"
//! role = "client"
//! token_file = "/etc/linerate/token"   # an agent started by hand
//! ```
//!
//! Parsing and checking only; nothing here connects anywhere.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::error::ModelError;

/// The agents' default control port.
pub const DEFAULT_PORT: u16 = 7470;

/// What a host is for when the command line does not say
/// (`--clients`/`--servers` name hosts explicitly).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Server,
    /// Either, as the command line picks.
    #[default]
    Any,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub port: Option<u16>,
    pub ssh_user: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    /// Where `cluster up` puts the binary on hosts that lack this version.
    pub remote_binary: Option<String>,
    pub token_file: Option<PathBuf>,
}

/// The cluster and namespace of agents `linerate k8s up` started.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KubeRef {
    pub namespace: String,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub name: String,
    pub address: String,
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<String>,
    /// Where clients reach each data address instead (a Kubernetes
    /// Service, a NAT that forwards the agent's `serve --data-port`), in
    /// `data`'s order, on the same port; default: at the data addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connect: Vec<String>,
    #[serde(default)]
    pub role: Role,
    /// What the host is where it runs, for results and reports: `node`
    /// (the machine), `network` (pod or host), `path` (pod-ip, service),
    /// `zone` ... (`linerate k8s up` writes them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub site: BTreeMap<String, String>,
    /// `user@host` for ssh (default: `ssh_user@address`, or `address`).
    pub ssh: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_options: Vec<String>,
    pub remote_binary: Option<String>,
    /// The agent's token: for agents started by hand. Without it, the token
    /// `cluster up` gave the agent is used, else --token-file/LINERATE_TOKEN.
    pub token_file: Option<PathBuf>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostsFile {
    #[serde(default)]
    pub defaults: Defaults,
    /// Agents `linerate k8s up` started: where, for `k8s down`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubeRef>,
    #[serde(default)]
    pub host: Vec<HostEntry>,
}

/// One host, with the defaults applied and the addresses parsed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub name: String,
    pub address: IpAddr,
    pub port: u16,
    /// Never empty: the control address when the file lists none.
    pub data: Vec<IpAddr>,
    /// Data address -> where clients reach it (`connect`).
    pub connect: Vec<(IpAddr, IpAddr)>,
    pub role: Role,
    pub site: BTreeMap<String, String>,
    pub ssh: String,
    pub ssh_options: Vec<String>,
    pub remote_binary: String,
    pub token_file: Option<PathBuf>,
}

impl Host {
    pub fn control(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.address, self.port)
    }
}

/// Where `cluster up` puts the binary when the file does not say.
pub const DEFAULT_REMOTE_BINARY: &str = ".cache/linerate/linerate";

fn ip(host: &str, what: &'static str, text: &str) -> Result<IpAddr, ModelError> {
    text.trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|_| ModelError::NotAnIp {
            host: host.into(),
            what,
            text: text.into(),
        })
}

/// A host name: what `--clients d1,d2` and results call it.
fn check_name(name: &str) -> Result<(), ModelError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(ModelError::HostName(name.into()))
    }
}

impl HostsFile {
    pub fn parse(text: &str) -> Result<HostsFile, ModelError> {
        // "LINE: message", as study files are reported (the whole TOML
        // error, with its source excerpt, read as one mangled line).
        toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            });
            ModelError::HostsSyntax {
                line,
                message: e.message().trim().into(),
            }
        })
    }

    /// Every host with the defaults applied; names unique, addresses valid.
    pub fn hosts(&self, base: &Path) -> Result<Vec<Host>, ModelError> {
        if self.host.is_empty() {
            return Err(ModelError::NoHosts);
        }
        let mut out: Vec<Host> = Vec::new();
        for e in &self.host {
            check_name(&e.name)?;
            if out.iter().any(|h| h.name == e.name) {
                return Err(ModelError::HostTwice(e.name.clone()));
            }
            let address = ip(&e.name, "address", &e.address)?;
            let mut data = e
                .data
                .iter()
                .map(|d| ip(&e.name, "data address", d))
                .collect::<Result<Vec<_>, _>>()?;
            if data.is_empty() {
                data.push(address);
            }
            if !e.connect.is_empty() && e.connect.len() != data.len() {
                return Err(ModelError::ConnectCount {
                    host: e.name.clone(),
                    connect: e.connect.len(),
                    data: data.len(),
                });
            }
            let connect = e
                .connect
                .iter()
                .map(|c| ip(&e.name, "connect address", c))
                .collect::<Result<Vec<_>, _>>()?;
            let connect: Vec<(IpAddr, IpAddr)> = data.iter().copied().zip(connect).collect();
            let ssh = match (&e.ssh, &self.defaults.ssh_user) {
                (Some(s), _) => s.clone(),
                (None, Some(u)) => format!("{u}@{}", e.address),
                (None, None) => e.address.clone(),
            };
            let mut ssh_options = self.defaults.ssh_options.clone();
            ssh_options.extend(e.ssh_options.iter().cloned());
            let token_file = e
                .token_file
                .clone()
                .or_else(|| self.defaults.token_file.clone())
                .map(|p| if p.is_relative() { base.join(p) } else { p });
            out.push(Host {
                name: e.name.clone(),
                address,
                port: e.port.or(self.defaults.port).unwrap_or(DEFAULT_PORT),
                data,
                connect,
                role: e.role,
                site: e.site.clone(),
                ssh,
                ssh_options,
                remote_binary: e
                    .remote_binary
                    .clone()
                    .or_else(|| self.defaults.remote_binary.clone())
                    .unwrap_or_else(|| DEFAULT_REMOTE_BINARY.into()),
                token_file,
            });
        }
        Ok(out)
    }
}

/// One side of a test as the command line names it: `d1`, or `sut:10.0.1.1`
/// (a host and one of its data addresses).
#[derive(Clone, Debug, PartialEq)]
pub struct Pick {
    pub host: String,
    pub address: Option<IpAddr>,
}

/// Parses `--clients d1,d2` / `--servers sut:10.0.0.1,sut:10.0.1.1`.
pub fn parse_picks(text: &str) -> Result<Vec<Pick>, ModelError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (host, address) = match item.split_once(':') {
            Some((h, a)) => (h, Some(ip(h, "address", a)?)),
            None => (item, None),
        };
        check_name(host)?;
        out.push(Pick {
            host: host.to_string(),
            address,
        });
    }
    if out.is_empty() {
        return Err(ModelError::NoPicks);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[defaults]
port = 7471
ssh_user = "root"
ssh_options = ["-F", "cfg"]

[[host]]
name = "sut"
address = "198.18.1.1"
data = ["198.18.1.1", "198.18.3.1"]
role = "server"

[[host]]
name = "d1"
address = "198.18.0.1"
port = 9000
ssh = "me@d1.example"
token_file = "d1.token"
role = "client"
"#;

    #[test]
    fn defaults_apply_and_addresses_parse() {
        let f = HostsFile::parse(FILE).unwrap();
        let hosts = f.hosts(Path::new("/etc/lr")).unwrap();
        assert_eq!(hosts.len(), 2);
        let sut = &hosts[0];
        assert_eq!(sut.port, 7471);
        assert_eq!(sut.data.len(), 2);
        assert_eq!(sut.ssh, "root@198.18.1.1");
        assert_eq!(sut.ssh_options, vec!["-F", "cfg"]);
        assert_eq!(sut.role, Role::Server);
        assert_eq!(sut.remote_binary, DEFAULT_REMOTE_BINARY);
        let d1 = &hosts[1];
        assert_eq!(d1.port, 9000);
        assert_eq!(d1.data, vec![d1.address]);
        assert_eq!(d1.ssh, "me@d1.example");
        assert_eq!(d1.token_file, Some(PathBuf::from("/etc/lr/d1.token")));
        assert_eq!(d1.control().to_string(), "198.18.0.1:9000");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let e = HostsFile::parse("[[host]]\nname = \"a\"\naddress = \"x\"\n")
            .unwrap()
            .hosts(Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains("host a") && e.contains("not an IP"), "{e}");
        let e = HostsFile::parse("[[host]]\nname = \"a\"\naddres = \"1.2.3.4\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("addres"), "{e}");
        let twice = "[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\n[[host]]\nname = \"a\"\naddress = \"127.0.0.2\"\n";
        let e = HostsFile::parse(twice)
            .unwrap()
            .hosts(Path::new("."))
            .unwrap_err();
        assert_eq!(e.to_string(), "host a is listed twice");
        assert!(HostsFile::default().hosts(Path::new(".")).is_err());
    }

    /// `connect`: one address per data address, where clients reach it
    /// (a Service); `site` is kept as written.
    #[test]
    fn connect_pairs_each_data_address() {
        let text = "[[host]]\nname = \"b-svc\"\naddress = \"198.19.120.5\"\nconnect = [\"198.19.100.7\"]\nsite = { node = \"n1\", path = \"service\" }\n";
        let h = &HostsFile::parse(text)
            .unwrap()
            .hosts(Path::new("."))
            .unwrap()[0];
        let pod: IpAddr = "198.19.120.5".parse().unwrap();
        let svc: IpAddr = "198.19.100.7".parse().unwrap();
        assert_eq!(h.connect, vec![(pod, svc)]);
        assert_eq!(h.site["path"], "service");
        let two = text.replace(
            "connect = [",
            "data = [\"198.19.120.5\", \"198.19.121.5\"]\nconnect = [",
        );
        let e = HostsFile::parse(&two)
            .unwrap()
            .hosts(Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("connect lists 1 addresses for 2 data addresses"),
            "{e}"
        );
    }

    #[test]
    fn picks_name_hosts_and_addresses() {
        let p = parse_picks("sut:10.0.0.1, sut:10.0.1.1,d2").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].host, "sut");
        assert_eq!(p[1].address, Some("10.0.1.1".parse().unwrap()));
        assert_eq!(p[2].address, None);
        assert!(parse_picks("sut:nope").is_err());
        assert!(parse_picks(" , ").is_err());
    }
}
