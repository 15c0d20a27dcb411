//! The Configuration Summary: the settings of the hosts a result ran on
//! (machine, kernel, crypto, sysctls, links, firewall), one row per setting
//! with the client's and the agent's value, as both a single report and a
//! report of several environments show them.

use crate::model::host::{HostInfo, LinkInfo};

/// One row's text for a link, when the link has that facet.
type LinkFacet = dyn Fn(&LinkInfo) -> Option<String>;

/// The Configuration Summary's rows: (setting, client, agent).
pub fn host_rows(c: &HostInfo, a: &HostInfo) -> Vec<(String, String, String)> {
    let mut rows = vec![
        ("host".to_string(), c.hostname.clone(), a.hostname.clone()),
        ("operating system".into(), c.os.clone(), a.os.clone()),
        ("kernel".into(), c.kernel.clone(), a.kernel.clone()),
        ("architecture".into(), c.arch.clone(), a.arch.clone()),
        ("CPU".into(), c.cpu_model.clone(), a.cpu_model.clone()),
        ("CPUs".into(), c.cpus.to_string(), a.cpus.to_string()),
        (
            "memory".into(),
            format!("{:.1} GiB", c.mem_total_mib as f64 / 1024.0),
            format!("{:.1} GiB", a.mem_total_mib as f64 / 1024.0),
        ),
        (
            "CPU features (crypto, vector)".into(),
            c.cpu_flags.join(" "),
            a.cpu_flags.join(" "),
        ),
        ("crypto".into(), c.crypto.clone(), a.crypto.clone()),
        (
            "TLS libraries".into(),
            c.tls_library.clone(),
            a.tls_library.clone(),
        ),
    ];
    for (k, v) in &c.sysctls {
        rows.push((
            k.clone(),
            v.clone(),
            a.sysctls.get(k).cloned().unwrap_or_default(),
        ));
    }
    let mut names: Vec<&str> = c.links.iter().map(|l| l.name.as_str()).collect();
    for l in &a.links {
        if !names.contains(&l.name.as_str()) {
            names.push(&l.name);
        }
    }
    for n in names {
        let link = |h: &HostInfo| h.links.iter().find(|l| l.name == n).cloned();
        let (lc, la) = (link(c), link(a));
        let get = |f: &LinkFacet| {
            let cell = |l: &Option<LinkInfo>| l.as_ref().and_then(f);
            let (x, y) = (cell(&lc), cell(&la));
            (x.is_some() || y.is_some()).then(|| {
                let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                (dash(x), dash(y))
            })
        };
        // The driver, coalescing and queue rows exist only for devices
        // that have them (a NIC, not lo or a veth without a bus).
        let facets: [(String, &LinkFacet); 4] = [
            (format!("link {n}"), &|l| Some(l.describe())),
            (format!("link {n} driver"), &|l| {
                l.driver.as_ref().map(|d| d.describe())
            }),
            (format!("link {n} interrupt coalescing"), &|l| {
                l.coalesce
                    .as_ref()
                    .filter(|_| l.driver.is_some())
                    .map(|c| c.describe())
            }),
            (format!("link {n} queues and IRQ affinity"), &|l| {
                l.describe_queues()
                    .filter(|_| !l.irqs.is_empty() || l.rx_queues.unwrap_or(0) > 1)
            }),
        ];
        for (key, f) in facets {
            if let Some((x, y)) = get(f) {
                rows.push((key, x, y));
            }
        }
    }
    let fw = |h: &HostInfo| {
        h.firewall
            .as_ref()
            .map(|f| f.describe())
            .unwrap_or_else(|| "not recorded".into())
    };
    rows.push(("firewall".into(), fw(c), fw(a)));
    let security = |h: &HostInfo| {
        h.security
            .as_ref()
            .map(|s| s.describe())
            .unwrap_or_else(|| "not recorded".into())
    };
    rows.push(("SELinux, AppArmor, audit".into(), security(c), security(a)));
    rows.push((
        "linerate".into(),
        format!("{} ({})", c.linerate_version, c.git_commit),
        format!("{} ({})", a.linerate_version, a.git_commit),
    ));
    // A test's NIC settings (nic.*): what each end's interfaces had and
    // what their drivers refused; absent when the test asked for none.
    if !c.nic.is_empty() || !a.nic.is_empty() {
        let nic = |h: &HostInfo| {
            if h.nic.is_empty() {
                "not changed".to_string()
            } else {
                h.nic
                    .iter()
                    .map(|i| i.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        };
        rows.push(("NIC settings (nic.*)".into(), nic(c), nic(a)));
    }
    rows
}
