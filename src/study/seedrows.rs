//! docs/seeds.md against the built-in studies, row by row: what each seed
//! experiment measured, written as things a study can be checked for (the
//! sweep axes its points vary, the workloads they run, the metrics its
//! plots and tables show), and the status the doc gives it. A row whose
//! study loses an axis, a workload or a metric, or whose doc status drifts
//! from this table, fails here.

use std::collections::BTreeSet;

use crate::model::options::TestOptions;
use crate::study::builtin::{self, BUILTIN};
use crate::study::file::Study;
use crate::study::sweep::{self, Point};

/// A row's status, as docs/seeds.md spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// The seed's metric over the seed's axes (scaled to the host).
    Runs,
    /// Runs, with a named stand-in for what the host lacks.
    Substituted,
    /// Part of the experiment runs; the doc's Notes say what differs.
    Partly,
    /// Nothing here runs it; the Notes say what a user with the hardware
    /// runs, or what linerate measures instead.
    Cannot,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Runs => "runs",
            Status::Substituted => "substituted",
            Status::Partly => "partly",
            Status::Cannot => "cannot",
        }
    }
}

/// One row of docs/seeds.md: what the seed measured, as a study shows it.
struct Row {
    id: &'static str,
    status: Status,
    /// The built-in studies that reproduce it (each lists the row).
    studies: &'static [&'static str],
    /// Parameters the row's points vary (`case` for named cases).
    axes: &'static [&'static str],
    /// Parameter values some point must have (the seed's own points).
    points: &'static [(&'static str, &'static str)],
    /// Workloads its points run.
    workloads: &'static [&'static str],
    /// Metrics its plots or tables show.
    metrics: &'static [&'static str],
    /// Substituted: the stand-in, named in a study's description.
    stand_in: Option<&'static str>,
}

const NONE: Row = Row {
    id: "",
    status: Status::Cannot,
    studies: &[],
    axes: &[],
    points: &[],
    workloads: &[],
    metrics: &[],
    stand_in: None,
};

/// Every row of docs/seeds.md, in the doc's order.
const ROWS: &[Row] = &[
    Row {
        id: "000.1",
        status: Status::Runs,
        studies: &["seed000-scp-window"],
        axes: &["case", "rtt", "rcvbuf"],
        points: &[
            ("rtt", "0ms"),
            ("rtt", "200ms"),
            ("rcvbuf", "48K"),
            ("rcvbuf", "1M"),
        ],
        workloads: &["stream", "scp"],
        metrics: &["transfer_s", "throughput_bps"],
        ..NONE
    },
    Row {
        id: "000.2",
        status: Status::Substituted,
        studies: &["seed000-ipsec-streams"],
        axes: &["lab.tunnel", "direction", "flows"],
        points: &[
            ("lab.tunnel", "none"),
            ("lab.tunnel", "ipsec-ccm"),
            ("lab.tunnel", "ipsec"),
            ("lab.tunnel", "wireguard"),
            ("direction", "tx"),
            ("direction", "rx"),
            ("flows", "16"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps", "client_host_cpu_pct", "agent_cpu_pct"],
        stand_in: Some("WireGuard"),
    },
    Row {
        id: "000.3",
        status: Status::Substituted,
        studies: &["seed000-tls-single-stream"],
        axes: &["case", "direction", "tls"],
        points: &[
            ("direction", "rx"),
            ("direction", "tx"),
            ("tls", "false"),
            ("tls", "true"),
            ("case", "AES-256-CBC, TLS 1.2 (OpenSSL; the seed's)"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps"],
        stand_in: Some("AES-256-GCM"),
    },
    Row {
        id: "000.4",
        status: Status::Substituted,
        studies: &["seed000-tls-streams"],
        axes: &["case", "direction", "tls", "flows"],
        points: &[
            ("flows", "8"),
            ("flows", "16"),
            ("direction", "rx"),
            ("direction", "tx"),
            ("case", "AES-256-CBC, TLS 1.2 (OpenSSL; the seed's)"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps", "client_host_cpu_pct"],
        stand_in: Some("AES-256-GCM"),
    },
    Row {
        id: "001.1",
        status: Status::Runs,
        studies: &["seed000-scp-window", "seed001-send-window"],
        axes: &["case", "rtt"],
        points: &[("case", "sndbuf auto"), ("case", "sndbuf 128K")],
        workloads: &["stream", "scp"],
        metrics: &["throughput_bps", "model_ratio"],
        ..NONE
    },
    Row {
        id: "002.1",
        status: Status::Runs,
        studies: &["seed002-ports"],
        axes: &["ports", "direction"],
        points: &[("ports", "1"), ("ports", "4"), ("direction", "rx")],
        workloads: &["stream"],
        metrics: &["throughput_bps", "agent_cpu_pct", "agent_host_cpu_pct"],
        ..NONE
    },
    Row {
        id: "002.2",
        ..NONE
    },
    Row {
        id: "002.3",
        status: Status::Runs,
        studies: &["seed002-connections"],
        axes: &["flows", "direction"],
        points: &[("flows", "2000"), ("direction", "tx"), ("direction", "rx")],
        workloads: &["stream"],
        metrics: &["throughput_bps"],
        ..NONE
    },
    Row {
        id: "002.4",
        status: Status::Runs,
        studies: &["seed002-udp-small-packets"],
        axes: &["flows", "batch"],
        points: &[("flows", "1000"), ("batch", "1")],
        workloads: &["udp-stream"],
        metrics: &["packets_sent_per_s", "packets_per_s"],
        ..NONE
    },
    Row {
        id: "002.5",
        status: Status::Runs,
        studies: &["seed002-udp-binding"],
        axes: &["case", "flows"],
        points: &[("flows", "1000"), ("case", "unbound")],
        workloads: &["udp-stream"],
        metrics: &["packets_per_s", "packets_sent_per_s"],
        ..NONE
    },
    Row {
        id: "002.6",
        status: Status::Runs,
        studies: &["seed002-tunings"],
        axes: &["case", "direction", "flows"],
        points: &[
            ("case", "soft LSO"),
            ("case", "LSO + soft rings"),
            ("case", "LSO + soft rings + 256 KB buffers"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps", "client_us_per_kb", "agent_us_per_kb"],
        ..NONE
    },
    Row {
        id: "002.7",
        status: Status::Runs,
        studies: &["seed002-offloads-zerocopy"],
        axes: &["case", "zerocopy"],
        points: &[("case", "offloads off"), ("zerocopy", "true")],
        workloads: &["stream"],
        metrics: &["client_us_per_kb", "agent_us_per_kb"],
        ..NONE
    },
    Row {
        id: "002.8",
        status: Status::Runs,
        studies: &["seed002-congestion-control"],
        axes: &["lab.cc", "rtt", "lab.loss"],
        points: &[
            ("lab.cc", "reno"),
            ("lab.cc", "bic"),
            ("lab.cc", "highspeed"),
            ("lab.cc", "scalable"),
            ("lab.loss", "0%"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps"],
        ..NONE
    },
    Row {
        id: "002.9",
        ..NONE
    },
    Row {
        id: "002.10",
        status: Status::Runs,
        studies: &["seed002-jumbo"],
        axes: &["lab.mtu", "direction", "case"],
        points: &[("lab.mtu", "1500"), ("lab.mtu", "9000")],
        workloads: &["stream"],
        metrics: &["throughput_bps", "client_host_cpu_pct", "client_us_per_kb"],
        ..NONE
    },
    Row {
        id: "002.11",
        status: Status::Runs,
        studies: &["seed002-tunings-latency"],
        axes: &["case", "response"],
        points: &[
            ("case", "none"),
            ("case", "LSO"),
            ("case", "LSO + soft rings"),
        ],
        workloads: &["rr"],
        metrics: &["latency_p50_us", "latency_p99_us"],
        ..NONE
    },
    Row {
        id: "003.1",
        ..NONE
    },
    Row {
        id: "003.2",
        status: Status::Substituted,
        studies: &["seed003-awm", "seed003-awm-links"],
        axes: &["case", "lab.mtu", "lab.link", "lab.rate"],
        points: &[
            ("lab.mtu", "1492"),
            ("lab.mtu", "8992"),
            ("lab.rate", "1gbit"),
            ("lab.rate", "10gbit"),
            ("lab.link", "bridge"),
            ("case", "CRR 64/8k"),
            ("case", "stream get 20/20M"),
        ],
        workloads: &["rr", "crr", "stream"],
        metrics: &["transactions_per_s", "agent_us_per_tx"],
        stand_in: Some("macvlan"),
    },
    Row {
        id: "003.3",
        status: Status::Runs,
        studies: &["seed003-window-sessions"],
        axes: &["case", "flows", "sysctl.net.core.netdev_max_backlog"],
        points: &[
            ("case", "seed's OSA values"),
            ("flows", "10"),
            ("sysctl.net.core.netdev_max_backlog", "1000"),
            ("sysctl.net.core.netdev_max_backlog", "2500"),
        ],
        workloads: &["stream"],
        metrics: &["throughput_bps"],
        ..NONE
    },
    Row {
        id: "003.4",
        status: Status::Partly,
        ..NONE
    },
    Row {
        id: "003.5",
        status: Status::Runs,
        studies: &["seed003-firewall"],
        axes: &["case", "firewall.rules", "firewall.conntrack"],
        points: &[("firewall.rules", "0"), ("firewall.rules", "1000")],
        workloads: &["rr", "crr"],
        metrics: &["transactions_per_s", "agent_us_per_tx"],
        ..NONE
    },
    Row {
        id: "003.6",
        status: Status::Substituted,
        studies: &["seed003-large-mtu"],
        axes: &[
            "case",
            "lab.mtu",
            "sysctl.net.ipv4.tcp_wmem",
            "sysctl.net.ipv4.tcp_rmem",
        ],
        points: &[
            ("lab.mtu", "8192"),
            ("lab.mtu", "57344"),
            ("sysctl.net.ipv4.tcp_wmem", "4096 16384 131072"),
            ("case", "stream 64K writes, CPU checksums"),
            ("case", "stream 64K writes, no checksumming"),
        ],
        workloads: &["stream", "rr"],
        metrics: &["throughput_bps", "client_us_per_kb", "agent_us_per_tx"],
        stand_in: Some("veth"),
    },
    Row {
        id: "003.7",
        status: Status::Runs,
        studies: &["seed003-page-sizes"],
        axes: &["response", "flows"],
        points: &[("response", "40"), ("response", "1M"), ("flows", "32")],
        workloads: &["crr"],
        metrics: &["transactions_per_s", "throughput_bps", "agent_us_per_tx"],
        ..NONE
    },
    Row {
        id: "003.8",
        status: Status::Partly,
        studies: &["seed003-handshakes"],
        axes: &["flows", "cert", "resume"],
        points: &[("flows", "32"), ("cert", "rsa2048")],
        workloads: &["tls-handshake"],
        metrics: &["transactions_per_s", "agent_us_per_tx"],
        ..NONE
    },
    Row {
        id: "003.9",
        ..NONE
    },
    Row {
        id: "003.10",
        status: Status::Substituted,
        studies: &["seed003-ciphers"],
        axes: &["case", "cipher", "message"],
        points: &[
            ("cipher", "aes128-cbc-hmac-sha1"),
            ("cipher", "aes192-cbc-hmac-sha256"),
            ("cipher", "aes256-cbc-hmac-sha256"),
            ("cipher", "des-cbc-hmac-sha1"),
            ("cipher", "3des-cbc-hmac-sha1"),
            ("cipher", "sha256"),
            ("case", "software (masked)"),
        ],
        workloads: &["cipher"],
        metrics: &["cipher_us_per_kb"],
        stand_in: Some("AES-NI"),
    },
    Row {
        id: "003.11",
        status: Status::Substituted,
        studies: &["seed003-tls-crypto-hw"],
        axes: &["case", "tls", "crypto_hw"],
        points: &[("crypto_hw", "false"), ("crypto_hw", "true")],
        workloads: &["stream", "crr"],
        metrics: &["client_us_per_kb", "agent_us_per_tx"],
        stand_in: Some("AES-NI"),
    },
    Row {
        id: "003.12",
        status: Status::Substituted,
        studies: &["seed003-ipsec-cost"],
        axes: &["case", "lab.tunnel"],
        points: &[
            ("lab.tunnel", "none"),
            ("lab.tunnel", "ipsec-ccm"),
            ("lab.tunnel", "ipsec"),
            ("lab.tunnel", "wireguard"),
        ],
        workloads: &["rr", "crr"],
        metrics: &["agent_us_per_tx", "latency_p99_us"],
        stand_in: Some("WireGuard"),
    },
    Row {
        id: "004.1",
        status: Status::Runs,
        studies: &["seed004-connections-tuned", "seed002-connections"],
        axes: &["case", "direction", "flows"],
        points: &[("case", "untuned"), ("case", "tuned"), ("flows", "1000")],
        workloads: &["stream"],
        metrics: &["throughput_bps"],
        ..NONE
    },
    Row {
        id: "004.2",
        status: Status::Runs,
        studies: &["seed004-memcached"],
        axes: &["values", "flows"],
        points: &[
            ("values", "4-100"),
            ("values", "1K-2K"),
            ("values", "5K-20K"),
        ],
        workloads: &["memcache"],
        metrics: &["ops_per_s", "get_p99_us"],
        ..NONE
    },
    Row {
        id: "004.3",
        status: Status::Substituted,
        studies: &["seed004-polling"],
        axes: &["spin", "flows"],
        points: &[("spin", "false"), ("spin", "true"), ("direction", "rx")],
        workloads: &["stream"],
        metrics: &["throughput_bps", "client_us_per_kb"],
        stand_in: Some("busy polling"),
    },
];

const DOC: &str = include_str!("../../docs/seeds.md");

/// The doc's table rows: (row, "Reproduce with", status, notes).
fn doc_rows() -> Vec<[&'static str; 4]> {
    DOC.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = *cells.get(1)?;
            let row = id.len() >= 5
                && id.as_bytes()[3] == b'.'
                && id[..3].parse::<u32>().is_ok()
                && id[4..].parse::<u32>().is_ok();
            (row && cells.len() == 8).then(|| [id, cells[4], cells[5], cells[6]])
        })
        .collect()
}

fn loaded(name: &str) -> (Study, Vec<Point>) {
    let s = builtin::get(name)
        .unwrap_or_else(|| panic!("{name} is not built in"))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let p = sweep::expand(&s, &TestOptions::default()).unwrap();
    (s, p)
}

/// The doc has exactly this table's rows, in its order, with its statuses.
#[test]
fn every_doc_row_has_an_entry_with_the_same_status() {
    let doc = doc_rows();
    let ids: Vec<&str> = doc.iter().map(|r| r[0]).collect();
    let ours: Vec<&str> = ROWS.iter().map(|r| r.id).collect();
    assert_eq!(ids, ours, "docs/seeds.md rows vs the table here");
    for (d, r) in doc.iter().zip(ROWS) {
        assert_eq!(
            d[2],
            r.status.word(),
            "row {}: status in docs/seeds.md",
            r.id
        );
        assert!(
            d[3].len() > 20,
            "row {}: Notes say what runs and what differs",
            r.id
        );
        let named: BTreeSet<&str> = d[1]
            .split(|c: char| c == '`' || c.is_whitespace() || c == ';' || c == ',')
            .filter(|w| w.starts_with("seed") && w.len() > 7)
            .collect();
        let want: BTreeSet<&str> = r.studies.iter().copied().collect();
        assert_eq!(named, want, "row {}: studies named in Reproduce with", r.id);
    }
}

/// The summary line and the study counts in docs/seeds.md and README.md
/// are the table's and BUILTIN's.
#[test]
fn doc_counts_are_current() {
    let n = |s: Status| ROWS.iter().filter(|r| r.status == s).count();
    let line = format!(
        "{} rows: {} runs, {} substituted, {} partly, {} cannot",
        ROWS.len(),
        n(Status::Runs),
        n(Status::Substituted),
        n(Status::Partly),
        n(Status::Cannot)
    );
    assert!(DOC.contains(&line), "docs/seeds.md should say: {line}");
    let idle: Vec<&str> = BUILTIN
        .iter()
        .filter(|b| b.rows.is_empty())
        .map(|b| b.name)
        .collect();
    let studies = format!(
        "{} built-in studies, {} of which reproduce no seed row",
        BUILTIN.len(),
        idle.len()
    );
    assert!(
        DOC.contains(&studies),
        "docs/seeds.md should say: {studies}"
    );
    for name in &idle {
        assert!(
            DOC.contains(&format!("`{name}`")),
            "docs/seeds.md names {name}"
        );
    }
    let readme = include_str!("../../README.md");
    let all = format!("all {} seed experiments", ROWS.len());
    assert!(readme.contains(&all), "README.md should say: {all}");
    let but = format!("Every built-in study but {}", words(idle.len()));
    assert!(readme.contains(&but), "README.md should say: {but}");
}

fn words(n: usize) -> &'static str {
    [
        "none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ]
    .get(n)
    .copied()
    .unwrap_or("many")
}

/// A row's studies list it, and every row a study lists has it here.
#[test]
fn rows_and_builtin_studies_name_each_other() {
    for r in ROWS {
        match r.status {
            Status::Runs | Status::Substituted => {
                assert!(!r.studies.is_empty(), "{} runs: which study?", r.id)
            }
            Status::Cannot => assert!(r.studies.is_empty(), "{} cannot run", r.id),
            Status::Partly => {}
        }
        assert_eq!(
            r.stand_in.is_some(),
            r.status == Status::Substituted,
            "{}",
            r.id
        );
        for s in r.studies {
            let b = builtin::find(s).unwrap_or_else(|| panic!("{}: {s} not built in", r.id));
            assert!(b.rows.contains(&r.id), "{s} should list row {}", r.id);
        }
    }
    for b in BUILTIN {
        for id in b.rows {
            let r = ROWS.iter().find(|r| r.id == *id);
            let r = r.unwrap_or_else(|| panic!("{}: row {id} has no entry", b.name));
            assert!(
                r.studies.contains(&b.name),
                "row {id} should name {}",
                b.name
            );
        }
    }
}

/// Each row's studies have the seed's axes, points, workloads and
/// metrics, and a substituted row's study names its stand-in.
#[test]
fn studies_measure_what_their_seed_rows_measured() {
    for r in ROWS.iter().filter(|r| !r.studies.is_empty()) {
        let (mut axes, mut points, mut workloads, mut shown) = (
            BTreeSet::new(),
            BTreeSet::new(),
            BTreeSet::new(),
            BTreeSet::new(),
        );
        let mut described = String::new();
        for name in r.studies {
            let (s, ps) = loaded(name);
            for p in &ps {
                workloads.insert(p.spec.workload.to_string());
                for (k, v) in &p.params {
                    axes.insert(k.clone());
                    points.insert((k.clone(), v.clone()));
                }
                let direction = p.spec.direction.name().to_string();
                points.insert(("direction".into(), direction));
            }
            shown.extend(s.plots.iter().map(|p| p.y.clone()));
            shown.extend(s.tables.iter().flat_map(|t| t.columns.iter().cloned()));
            described.push_str(&s.description);
        }
        let id = r.id;
        for a in r.axes {
            assert!(
                axes.contains(*a),
                "{id}: no point varies {a} (has {axes:?})"
            );
        }
        for (k, v) in r.points {
            let kv = (k.to_string(), v.to_string());
            assert!(points.contains(&kv), "{id}: no point has {k}={v}");
        }
        for w in r.workloads {
            assert!(
                workloads.contains(*w),
                "{id}: no {w} point (has {workloads:?})"
            );
        }
        for m in r.metrics {
            assert!(shown.contains(*m), "{id}: no plot or table shows {m}");
        }
        if let Some(word) = r.stand_in {
            assert!(described.contains(word), "{id}: description names {word}");
        }
    }
}
