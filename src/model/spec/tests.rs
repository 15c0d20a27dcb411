use super::*;

#[test]
fn validation_names_the_flag() {
    let s = TestSpec {
        flows: 0,
        ..Default::default()
    };
    assert!(s.validate().unwrap_err().0.contains("--flows"));
    let s = TestSpec {
        cc: Some("re no".into()),
        ..Default::default()
    };
    assert!(s.validate().unwrap_err().0.contains("--cc"));
    assert!(TestSpec::default().validate().is_ok());
    // What a peer could ask an agent to allocate or wait for.
    let huge = TestSpec {
        request: 1 << 40,
        ..Default::default()
    };
    assert!(huge.validate().unwrap_err().0.contains("capped"));
    for bad in [f64::NAN, f64::INFINITY, -1.0, 1e12] {
        let t = TestSpec {
            duration_s: bad,
            ..Default::default()
        };
        assert!(t.validate().unwrap_err().0.contains("--duration"), "{bad}");
    }
    let many = TestSpec {
        flows: u32::MAX,
        ..Default::default()
    };
    assert!(many.validate().unwrap_err().0.contains("--flows"));
    let mut nl = TestSpec::default();
    nl.sysctl.insert("net.core.rmem_max".into(), "1\n2".into());
    assert!(nl.validate().unwrap_err().0.contains("one line"));
}

#[test]
fn the_default_read_size_follows_the_largest_message() {
    let with = |message: usize, bytes: Option<u64>| TestSpec {
        message,
        bytes,
        ..Default::default()
    };
    assert_eq!(with(16 << 10, None).default_read_size(), 16 << 10);
    assert_eq!(with(24 << 10, None).default_read_size(), 24 << 10);
    // A lone flow within 16..64 KiB: larger reads cost bbr its rate.
    assert_eq!(with(128 << 10, None).default_read_size(), 64 << 10);
    assert_eq!(with(1 << 20, None).default_read_size(), 64 << 10);
    assert_eq!(with(1024, None).default_read_size(), 16 << 10);
    assert_eq!(with(64 << 10, Some(20 << 20)).default_read_size(), 64 << 10);
    // Several flows within 16 KiB..1 MiB: their receivers pay per call.
    let flows = |message: usize| TestSpec {
        flows: 4,
        ..with(message, None)
    };
    assert_eq!(flows(128 << 10).default_read_size(), 128 << 10);
    assert_eq!(flows(4 << 20).default_read_size(), 1 << 20);
    assert_eq!(flows(1024).default_read_size(), 16 << 10);
    let rr = TestSpec {
        workload: Workload::named("rr"),
        request: 200,
        response: 32 << 10,
        message: 1,
        reply: 1,
        ..Default::default()
    };
    assert_eq!(rr.default_read_size(), 32 << 10);
    // Results from before the option: the engine's old rule.
    assert_eq!(with(16 << 10, None).effective_read_size(), 256 << 10);
    let set = TestSpec {
        read_size: 4096,
        ..Default::default()
    };
    assert_eq!(set.effective_read_size(), 4096);
    assert!(set.validate().is_ok());
    let huge = TestSpec {
        read_size: MAX_READ_SIZE + 1,
        ..Default::default()
    };
    assert!(huge.validate().unwrap_err().0.contains("--read-size"));
}

#[test]
fn gso_fills_a_send_with_what_the_kernel_takes() {
    let udp = |message: usize, gso: bool, batch: u32| TestSpec {
        workload: Workload::named("udp-stream"),
        message,
        gso,
        batch,
        ..Default::default()
    };
    assert_eq!(udp(64, false, 0).udp_batch(), UDP_BATCH);
    assert_eq!(udp(64, true, 0).udp_batch(), UDP_MAX_SEGMENTS);
    // 46 x 1,400 B fit one 65,507-byte datagram.
    assert_eq!(udp(1400, true, 0).udp_batch(), 46);
    assert_eq!(udp(60_000, true, 0).udp_batch(), 1);
    assert_eq!(udp(64, true, 16).udp_batch(), 16);
}
