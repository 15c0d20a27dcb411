use super::*;

#[test]
fn auto_places_a_busy_emulator_on_the_last_cpu() {
    let p = placement_among(EmulatorCpu::Auto, true, &[0, 1, 2, 3]).unwrap();
    assert_eq!(
        p,
        Some(Placement {
            emulator: 3,
            others: vec![0, 1, 2]
        })
    );
    // Not busy (an unshaped GSO emulator), one CPU, or off: not placed.
    assert_eq!(
        placement_among(EmulatorCpu::Auto, false, &[0, 1]).unwrap(),
        None
    );
    assert_eq!(
        placement_among(EmulatorCpu::Auto, true, &[0]).unwrap(),
        None
    );
    assert_eq!(
        placement_among(EmulatorCpu::Off, true, &[0, 1]).unwrap(),
        None
    );
    // An explicit CPU places any emulator; it must be allowed.
    let p = placement_among(EmulatorCpu::Cpu(0), false, &[0, 1]).unwrap();
    assert_eq!(
        p,
        Some(Placement {
            emulator: 0,
            others: vec![1]
        })
    );
    let e = placement_among(EmulatorCpu::Cpu(7), true, &[0, 1]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--emulator-cpu 7: this process may use CPUs 0-1 (or use auto or off)"
    );
}

#[test]
fn a_rack_has_1_to_16_clients_and_1_to_8_servers() {
    assert_eq!(Rack::new(1, 1).unwrap(), Rack::default());
    assert!(!Rack::default().is_rack());
    assert!(Rack::new(16, 8).unwrap().is_rack());
    assert!(Rack::new(1, 2).unwrap().is_rack());
    for (c, s, want) in [
        (0, 1, "--clients 0: a lab has 1 to 16 clients"),
        (17, 1, "--clients 17: a lab has 1 to 16 clients"),
        (1, 0, "--servers 0: a lab has 1 to 8 servers"),
        (4, 9, "--servers 9: a lab has 1 to 8 servers"),
    ] {
        assert_eq!(Rack::new(c, s).unwrap_err().to_string(), want);
    }
}

#[test]
fn a_rack_has_a_port_per_host() {
    let rack = Rack::new(3, 2).unwrap();
    let c = rack.client_hosts("wan");
    assert_eq!(c.len(), 3);
    assert_eq!(
        (c[0].ns.as_str(), c[0].addr.as_str()),
        ("lr-wan-c", "198.18.0.1")
    );
    assert_eq!(
        (c[2].ns.as_str(), c[2].addr.as_str()),
        ("lr-wan-c3", "198.18.4.1")
    );
    let s = rack.server_hosts("wan");
    assert_eq!(
        (s[1].ns.as_str(), s[1].addr.as_str()),
        ("lr-wan-s2", "198.18.3.1")
    );
    let ends = rack.veth_ends("wan");
    let has = |ns: &str, dev: &str| ends.contains(&(ns.to_string(), dev.to_string()));
    assert_eq!(ends.len(), 10);
    assert!(has("lr-wan-r", "c2") && has("lr-wan-r", "s1") && has("lr-wan-c3", "lr0"));
    // The one-client lab's four ends, as RPS steering always had them.
    let one = Rack::default().veth_ends("wan");
    assert_eq!(one.len(), 4);
    // Link k's emulator owns queues 2k and 2k+1 and its own counters.
    let spec = LabSpec::default();
    let e = emulator_config("wan", &spec, 3, None);
    assert_eq!(e.queues, [6, 7]);
    assert_eq!(
        e.stats.unwrap().to_string_lossy(),
        "/run/linerate/labs/wan.emulator3.json"
    );
    assert_eq!(emulator_config("wan", &spec, 0, Some(1)).queues, [0, 1]);
}

#[test]
fn a_rack_refuses_netem_and_a_fixed_emulator_cpu() {
    let spec = LabSpec::default();
    let rack = Rack::new(4, 1).unwrap();
    let e = check_rack(&spec, rack, Backend::Netem)
        .unwrap_err()
        .to_string();
    assert!(e.contains("use --emulator nfqueue"), "{e}");
    assert!(check_rack(&spec, Rack::new(1, 2).unwrap(), Backend::Netem).is_err());
    assert!(check_rack(&spec, rack, Backend::Auto).is_ok());
    assert!(check_rack(&spec, Rack::default(), Backend::Netem).is_ok());
    let pinned = LabSpec {
        emulator_cpu: EmulatorCpu::Cpu(1),
        ..LabSpec::default()
    };
    let e = check_rack(&pinned, rack, Backend::Nfqueue)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--emulator-cpu 1"), "{e}");
    assert!(check_rack(&pinned, Rack::new(1, 3).unwrap(), Backend::Nfqueue).is_ok());
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

#[test]
fn auto_counts_per_packet_lossy_and_rate_shaping_emulators_busy() {
    let spec = |rate: Option<&str>, loss: Option<&str>, per_packet: bool| {
        crate::lab::spec::LabOptions {
            rtt: Some("20ms".into()),
            rate: rate.map(String::from),
            loss: loss.map(String::from),
            per_packet,
            ..Default::default()
        }
        .build()
        .unwrap()
    };
    // A GSO emulator shaping 1 or 10 Gbit/s: placed (8 against 12% of a
    // core at 1 Gbit/s, bench/RESULTS.md).
    assert!(busy(&spec(Some("1gbit"), None, false)));
    assert!(busy(&spec(Some("10gbit"), None, false)));
    // Per packet by request or for loss.
    assert!(busy(&spec(None, None, true)));
    assert!(busy(&spec(Some("1gbit"), Some("1%"), false)));
    // A capacity lab (no rate, GSO) and a slow link: not placed.
    assert!(!busy(&spec(None, None, false)));
    assert!(!busy(&spec(Some("100mbit"), None, false)));
}
