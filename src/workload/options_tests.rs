use crate::model::error::ModelError;
use crate::model::exec::ExecSpec;
use crate::model::options::*;
use crate::model::spec::*;
use crate::workload::memcache::params::{KvDialect, KvSpec};
use clap::Parser;
use std::collections::BTreeMap;

/// `linerate run WORKLOAD [options]` as the roof parses it.
#[derive(Parser)]
struct Run {
    #[arg(value_parser = crate::workload::parser())]
    workload: Workload,
    #[arg(short = '6')]
    ipv6: bool,
    #[arg(long)]
    lab: Option<String>,
    #[command(flatten)]
    opts: TestOptions,
}

fn parse(line: &str) -> TestSpec {
    let line = line.split("   (LAB").next().unwrap();
    let args = line.replace("linerate run", "run");
    let r = Run::try_parse_from(args.split(' ')).unwrap_or_else(|e| panic!("{line}: {e}"));
    let mut o = r.opts;
    o.run.workload = Some(r.workload);
    o.run.ipv6 = Some(r.ipv6);
    crate::workload::build(&o, false).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn search_auto_and_ramp_command_lines_build_the_same_spec_back() {
    for line in [
            "linerate run rr --search p99<=300us",
            "linerate run memcache --service memcached --search p999<=2ms --search-resolution 5 --duration 3",
            "linerate run udp-rr --search loss_pct<=0.5",
            "linerate run rr --duration auto --max-duration 20",
            "linerate run rr --rate 2000 --rate-ramp 30 --duration auto",
            "linerate run udp-rr --rate 2000 --arrivals poisson",
            "linerate run memcache --service memcached --search p99<=1ms --arrivals poisson",
        ] {
            let s = parse(line);
            // The shell needs the target quoted; the parser here splits on spaces.
            let back = to_command_line(&s, &crate::workload::facts(s.workload)).replace('\'', "");
            assert_eq!(parse(&back), s, "{line} -> {back}");
        }
}

#[test]
fn an_rrul_command_line_builds_the_same_spec_back() {
    for line in [
        "linerate run rrul",
        "linerate run rrul --idle 5 --probe-rate 50 --streams 8 --duration 30 --warmup 2",
        "linerate run rrul --request 200 --message 64K --outstanding 4 --cc reno",
    ] {
        let s = parse(line);
        let r = crate::workload::rrul::params::RrulSpec::of(&s).unwrap();
        assert_eq!(s.flows, 2 * r.streams + 2);
        let back = to_command_line(&s, &crate::workload::facts(s.workload));
        assert_eq!(parse(&back), s, "{line} -> {back}");
    }
    assert_eq!(
        {
            let s = parse("linerate run rrul");
            to_command_line(&s, &crate::workload::facts(s.workload))
        },
        "linerate run rrul"
    );
}

#[test]
fn an_rpm_command_line_builds_the_same_spec_back() {
    for line in [
        "linerate run rpm",
        "linerate run rpm --rpm-order sequential --mad 5 --rpm-interval 0.5 --tmp 90 --sdt 4 --mnp 8 --mps 50 --ptc 2 --rpm-clear --duration 12",
        "linerate run rpm --url https://nq.example:4043/.well-known/nq --tls-name nq.example",
    ] {
        let s = parse(line);
        assert!(
            crate::workload::rpm::params::RpmSpec::of(&s).is_ok(),
            "{line}"
        );
        let back = to_command_line(&s, &crate::workload::facts(s.workload));
        assert_eq!(parse(&back), s, "{line} -> {back}");
    }
    let s = parse("linerate run rpm");
    assert_eq!(s.duration_s, 20.0, "the draft's test limit by default");
    assert_eq!(
        to_command_line(&s, &crate::workload::facts(s.workload)),
        "linerate run rpm"
    );
}

#[test]
fn the_command_line_builds_the_same_spec_back() {
    let specs = [
        TestSpec::default(),
        TestSpec {
            workload: crate::model::spec::Workload::named("memcache"),
            flows: 8,
            outstanding: 4,
            rate: Some(5000.0),
            own: crate::model::own::Own::with(
                "kv",
                &KvSpec {
                    keys: 100_000,
                    key_size: 32,
                    zipf: Some(0.99),
                    values: "4-100:1,1K-2K:1".into(),
                    gets: 4,
                    sets: 1,
                    multiget: 10,
                    dialect: KvDialect::Meta,
                    ..Default::default()
                },
            ),
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("memcache"),
            own: crate::model::own::Own::with(
                "kv",
                &KvSpec {
                    service: None,
                    target: Some("127.0.0.1:11211".into()),
                    ..Default::default()
                },
            ),
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("rr"),
            request: 200,
            response: 32768,
            flows: 10,
            workers: 11,
            agent_workers: 3,
            nodelay: true,
            duration_s: 5.0,
            rate: Some(20000.0),
            cpus: Some(vec![0, 1]),
            spin: true,
            ..Default::default()
        },
        TestSpec {
            bytes: Some(20 << 20),
            per: Per::Transaction,
            direction: Direction::Rx,
            reply: 64,
            rcvbuf: Some(65536),
            window: WindowMode::Exact,
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("crr"),
            close: CloseMode::Reset,
            tls: Some(TlsSpec {
                cipher: Some("aes256-gcm".into()),
                cert: CertKind::Rsa2048,
                resume: true,
                kx: "p256".into(),
                ..Default::default()
            }),
            ipv6: true,
            ..Default::default()
        },
        TestSpec {
            message: 1 << 20,
            read_size: 64 << 10,
            direction: Direction::Rx,
            rx_poll_us: Some(50),
            ..Default::default()
        },
        TestSpec {
            rx_poll_us: Some(0),
            ..Default::default()
        },
        TestSpec {
            io: IoMode::Threads,
            flows: 3,
            workers: 3,
            agent_workers: 3,
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("rr"),
            io: IoMode::Epoll,
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("tls-handshake"),
            tls: Some(TlsSpec::default()),
            flows: 32,
            workers: TestSpec::default_workers(32),
            agent_workers: TestSpec::default_workers(32),
            ..Default::default()
        },
        TestSpec {
            workload: crate::model::spec::Workload::named("exec"),
            duration_s: 300.0,
            exec: Some(ExecSpec {
                command: vec!["ssh".into(), "-F".into(), "{ssh_config}".into()],
                server_command: None,
                sshd: true,
            }),
            ..Default::default()
        },
    ];
    for s in specs {
        let mut s = s;
        if s.workers == 1 && s.agent_workers == 1 {
            s.workers = TestSpec::default_workers_for(
                crate::workload::facts(s.workload).worker_per_flow,
                s.flows,
            );
            s.agent_workers = s.workers;
        }
        let f = crate::workload::facts(s.workload);
        if s.read_size == 0 && !f.datagrams && !f.program {
            s.read_size = s.default_read_size();
        }
        let line = to_command_line(&s, &crate::workload::facts(s.workload));
        assert_eq!(parse(&line), s, "{line}");
    }
}

#[test]
fn a_local_agent_shares_the_cpus_for_unpaced_udp_only() {
    let half = (TestSpec::default_workers(u32::MAX) / 2).max(1);
    let opts = |line: &str| {
        let o = Run::try_parse_from(line.split_whitespace()).unwrap();
        let mut t = o.opts;
        t.run.workload = Some(o.workload);
        t
    };
    let udp = opts("run udp-stream --flows 8");
    let local = crate::workload::build(&udp, true).unwrap();
    assert_eq!((local.workers, local.agent_workers), (half, half));
    let remote = crate::workload::build(&udp, false).unwrap();
    assert_eq!(remote.workers, TestSpec::default_workers(8));
    // A few bulk TCP flows get a worker each; many share one per CPU.
    let ncpu = TestSpec::default_workers(u32::MAX);
    let few = opts(&format!("run stream --flows {}", 4 * ncpu));
    assert_eq!(
        crate::workload::build(&few, false).unwrap().workers,
        4 * ncpu
    );
    let many = opts(&format!("run stream --flows {}", 4 * ncpu + 1));
    assert_eq!(crate::workload::build(&many, false).unwrap().workers, ncpu);
    assert_eq!(
        crate::workload::build(&opts("run rr --flows 8"), false)
            .unwrap()
            .workers,
        ncpu.min(8)
    );
    // Asked for, paced, or TCP: unchanged.
    for line in [
        "run udp-stream --flows 8 --workers 3",
        "run udp-stream --flows 8 --rate 10k",
        "run stream --flows 8",
        "run udp-rr --flows 8",
    ] {
        let o = opts(line);
        assert_eq!(
            crate::workload::build(&o, true).unwrap(),
            crate::workload::build(&o, false).unwrap(),
            "{line}: the local agent changes nothing"
        );
    }
}

#[test]
fn io_threads_where_a_worker_holds_one_closed_loop_flow() {
    let build = |line: &str| {
        let o = Run::try_parse_from(line.split_whitespace()).unwrap();
        let mut t = o.opts;
        t.run.workload = Some(o.workload);
        crate::workload::build(&t, false)
    };
    let io = |line: &str| build(line).unwrap().io;
    assert_eq!(io("run rr"), IoMode::Threads);
    assert_eq!(io("run rr --tls"), IoMode::Threads);
    assert_eq!(io("run rr --rate 1k"), IoMode::Epoll);
    assert_eq!(io("run rr --spin"), IoMode::Epoll);
    assert_eq!(io("run rr --flows 1000"), IoMode::Epoll);
    assert_eq!(io("run stream"), IoMode::Epoll);
    assert_eq!(io("run crr"), IoMode::Threads);
    assert_eq!(io("run crr --flows 64"), IoMode::Epoll);
    assert_eq!(io("run tls-handshake"), IoMode::Epoll);
    // Asked for: a thread per flow on each end.
    let s = build("run stream --io threads --flows 5").unwrap();
    assert_eq!((s.workers, s.agent_workers), (5, 5));
    for (line, why) in [
        ("run rr --io threads --rate 1k", "--rate"),
        ("run rr --io threads --spin", "--spin"),
        ("run rr --io threads --flows 4 --workers 2", "--workers"),
        ("run stream --io threads --flows 2000", "at most"),
    ] {
        let e = build(line).unwrap_err();
        assert!(e.0.contains(why), "{line}: {e}");
    }
}

#[test]
fn read_size_is_checked_and_recorded() {
    let opts = |line: &str| {
        let o = Run::try_parse_from(line.split_whitespace()).unwrap();
        let mut t = o.opts;
        t.run.workload = Some(o.workload);
        crate::workload::build(&t, false)
    };
    assert_eq!(opts("run stream").unwrap().read_size, 64 << 10);
    assert_eq!(
        opts("run stream --read-size 16K").unwrap().read_size,
        16 << 10
    );
    assert!(opts("run stream --read-size 0")
        .unwrap_err()
        .0
        .contains("--read-size"));
    assert!(opts("run stream --read-size 17M")
        .unwrap_err()
        .0
        .contains("--read-size"));
    // UDP keeps 0 (it reads whole datagrams).
    assert_eq!(opts("run udp-stream").unwrap().read_size, 0);
}

#[test]
fn command_line_names_what_differs_from_the_defaults() {
    assert_eq!(
        to_command_line(
            &TestSpec::default(),
            &crate::workload::facts(TestSpec::default().workload)
        ),
        "linerate run stream"
    );
    let s = TestSpec {
        workload: crate::model::spec::Workload::named("rr"),
        request: 200,
        response: 32768,
        flows: 10,
        workers: 11,
        agent_workers: 11,
        nodelay: true,
        duration_s: 5.0,
        ..Default::default()
    };
    assert_eq!(
            to_command_line(&s, &crate::workload::facts(s.workload)),
            "linerate run rr --request 200 --response 32K --flows 10 --workers 11 --duration 5 --nodelay"
        );
    let lab = TestSpec {
        bytes: Some(48 << 20),
        rcvbuf: Some(65536),
        window: WindowMode::Exact,
        rtt_s: Some(0.05),
        duration_s: 300.0,
        ..Default::default()
    };
    let c = to_command_line(&lab, &crate::workload::facts(lab.workload));
    assert!(
        c.starts_with("linerate run stream --lab LAB --bytes 48M"),
        "{c}"
    );
    assert!(
        c.ends_with("(LAB: linerate lab up LAB --rtt 50ms ...)"),
        "{c}"
    );
}

#[test]
fn study_keys_take_the_flags_units_and_defaults() {
    let o: TestOptions = toml::from_str(
            "workload = \"rr\"\nrequest = 200\nresponse = \"32K\"\nflows = 10\nduration = \"500ms\"\nrate = \"10k\"\nresume = true",
        )
        .unwrap();
    let s = crate::workload::build(&o, false).unwrap();
    assert_eq!(s.workload, crate::model::spec::Workload::named("rr"));
    assert_eq!(s.response, 32 * 1024);
    assert_eq!(s.duration_s, 0.5);
    assert_eq!(s.rate, Some(10_000.0));
    assert_eq!(s.workers, TestSpec::default_workers(10));
    assert_eq!(s.agent_workers, s.workers);
    let finite: TestOptions = toml::from_str("bytes = \"20M\"").unwrap();
    assert_eq!(
        crate::workload::build(&finite, false).unwrap().duration_s,
        300.0
    );
    let old: TestOptions = toml::from_str("threads = 2\nagent_threads = 1").unwrap();
    assert_eq!((old.run.workers, old.run.agent_workers), (Some(2), Some(1)));
    let poll: TestOptions = toml::from_str("rx_poll = \"1.5us\"").unwrap();
    assert_eq!(
        crate::workload::build(&poll, false).unwrap().rx_poll_us,
        Some(2)
    );
    let off: TestOptions = toml::from_str("rx_poll = \"off\"").unwrap();
    assert_eq!(
        crate::workload::build(&off, false).unwrap().rx_poll_us,
        Some(0)
    );
    assert!(toml::from_str::<TestOptions>("rx_poll = 20")
        .unwrap_err()
        .to_string()
        .contains("with its unit"));
    let it: TestOptions = toml::from_str("iterations = 3\nconfidence = \"95,2\"").unwrap();
    let c = it.confidence();
    assert_eq!((c.min, c.max, c.level_pct, c.width_pct), (3, 3, 95.0, 2.0));
}

#[test]
fn parsing() {
    assert_eq!(Iterations::parse("3..10").unwrap(), Iterations(3, 10));
    assert_eq!(Iterations::parse("4").unwrap(), Iterations(4, 4));
    assert!(Iterations::parse("5..2").is_err());
    assert!(Iterations::parse("0").is_err());
    assert_eq!(Target::parse("99,5").unwrap(), Target(99.0, 5.0));
    assert!(Target::parse("99").is_err());
    assert!(Target::parse("120,5").is_err());
    // The messages a user reads, word for word.
    let said = |e: ModelError| e.to_string();
    assert_eq!(
        said(Iterations::parse("x").unwrap_err()),
        "'x' is not an iteration count (examples: 3, 3..10)"
    );
    assert_eq!(
        said(Iterations::parse("0").unwrap_err()),
        "--iterations '0': need 1 <= MIN <= MAX <= 100"
    );
    assert_eq!(
        said(GetSet::parse("0:0").unwrap_err()),
        "'0:0' asks for no operation (example: 9:1)"
    );
    assert_eq!(
        said(Switch::parse("maybe").unwrap_err()),
        "'maybe' is not on or off"
    );
    assert_eq!(
        said(Rate::parse("fast").unwrap_err()),
        "'fast' is not a number (examples: 500, 10k, 1.5M); a bit rate takes its unit: 500mbit"
    );
    assert_eq!(
        said(Size::parse("12Q").unwrap_err()),
        "unknown size unit 'q' in '12Q' (use K, M or G, binary multiples)"
    );
}

#[test]
fn threads_is_an_alias_of_workers() {
    let r = Run::try_parse_from(["run", "rr", "--threads", "3", "--agent-threads", "2"]).unwrap();
    assert_eq!(
        (r.opts.run.workers, r.opts.run.agent_workers),
        (Some(3), Some(2))
    );
    let r = Run::try_parse_from(["run", "rr", "-T", "4", "--agent-workers", "1"]).unwrap();
    let mut o = r.opts;
    o.run.workload = Some(r.workload);
    let s = crate::workload::build(&o, false).unwrap();
    assert_eq!((s.workers, s.agent_workers), (4, 1));
}

#[test]
fn overlay_replaces_only_what_is_set() {
    let base: TestOptions = toml::from_str("flows = 4\nmessage = \"64K\"").unwrap();
    let top: TestOptions = toml::from_str("flows = 8").unwrap();
    let o = base.overlay(&top);
    assert_eq!(o.run.flows, Some(8));
    assert_eq!(o.stream.message, Some(Size(65536)));
}

#[test]
fn bad_values_say_what_is_wrong() {
    let e = toml::from_str::<TestOptions>("message = \"12Q\"").unwrap_err();
    assert!(e.to_string().contains("unknown size unit"), "{e}");
    let e = toml::from_str::<TestOptions>("flowz = 3").unwrap_err();
    assert!(e.to_string().contains("flowz"), "{e}");
    let c: TestOptions = toml::from_str("flows = 0").unwrap();
    assert!(crate::workload::build(&c, false)
        .unwrap_err()
        .0
        .contains("--flows"));
}

#[test]
fn every_option_is_an_axis() {
    let keys = axis_keys();
    for k in [
        "message",
        "flows",
        "workers",
        "rtt",
        "tls",
        "cipher",
        "iterations",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
    }
    assert!(!keys.iter().any(|x| x == "label"));
}

#[test]
fn sweep_values_and_study_tables_become_the_spec_s_nic_table() {
    let pairs: BTreeMap<String, toml::Value> = [
        ("nic.gro", toml::Value::Boolean(false)),
        ("nic.rx_ring", toml::Value::Integer(512)),
        ("nic.rps", toml::Value::String("0x03".into())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let o = TestOptions::from_pairs(&pairs).unwrap();
    let spec = crate::workload::build(&o, false).unwrap();
    let want: BTreeMap<String, String> = [("gro", "off"), ("rx-ring", "512"), ("rps", "3")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(spec.nic, want);
    // A case's table and a point's axis merge key by key.
    let case: TestOptions = toml::from_str("nic.tso = false\nnic.gro = true").unwrap();
    let merged = crate::workload::build(&case.overlay(&o), false).unwrap();
    assert_eq!(merged.nic["tso"], "off");
    assert_eq!(merged.nic["gro"], "off");
    assert!(is_axis("nic.tx-checksum"));
    assert!(!is_axis("nic.ring"));
    let bad: TestOptions = toml::from_str("nic.ring = 1").unwrap();
    assert!(crate::workload::build(&bad, false)
        .unwrap_err()
        .to_string()
        .contains("not a NIC setting"));
    let bad: TestOptions = toml::from_str("nic.gro = 3").unwrap();
    assert!(crate::workload::build(&bad, false)
        .unwrap_err()
        .to_string()
        .contains("nic.gro"));
}

#[test]
fn flows_per_port_grows_the_flows_with_the_ports() {
    let o: TestOptions = toml::from_str("ports = 3\nflows_per_port = 4").unwrap();
    let s = crate::workload::build(&o, false).unwrap();
    assert_eq!((s.flows, s.ports), (12, Some(3)));
    // On the command line too.
    let r =
        Run::try_parse_from(["run", "stream", "--ports", "2", "--flows-per-port", "5"]).unwrap();
    assert_eq!(crate::workload::build(&r.opts, true).unwrap().flows, 10);
    // A sweep's ports over a base test's flows per port.
    let base: TestOptions = toml::from_str("flows_per_port = 4").unwrap();
    let point: TestOptions = toml::from_str("ports = 2").unwrap();
    let s = crate::workload::build(&base.overlay(&point), false).unwrap();
    assert_eq!(s.flows, 8);
    for (bad, says) in [
        ("flows_per_port = 4", "needs --ports"),
        ("ports = 2\nflows_per_port = 4\nflows = 8", "give one"),
        ("ports = 2\nflows_per_port = 0", "at least 1"),
    ] {
        let o: TestOptions = toml::from_str(bad).unwrap();
        let e = crate::workload::build(&o, false).unwrap_err();
        assert!(e.0.contains(says), "{bad}: {}", e.0);
    }
    assert!(axis_keys().iter().any(|k| k == "flows_per_port"));
}
