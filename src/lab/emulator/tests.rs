use super::*;

fn shaping(delay_us: u64, rate_bps: Option<u64>) -> Shaping {
    Shaping {
        delay_us,
        rate_bps,
        ..Shaping::default()
    }
}

fn release(f: Fate) -> (u64, u64) {
    match f {
        Fate::Release {
            departure_ns,
            release_ns,
            ..
        } => (departure_ns, release_ns),
        other => panic!("expected a release, got {other:?}"),
    }
}

#[test]
fn time_the_wire_lost_delays_later_packets_and_fills_the_queue() {
    // 1 Gbit/s, a 16 KB drop-tail queue: 1538 B take 12.304 µs.
    let mut s = shaping(0, Some(1_000_000_000));
    s.queue_limit_bytes = Some(16_000);
    let mut l = Link::new(&s, 1500, 1).unwrap();
    assert_eq!(release(l.arrive(0, 1500, 52).0).0, 12_304);
    // The wire sat idle 100 µs behind a late wake-up: the next packet
    // departs after it, and the queue holds those 100 µs of the link.
    l.pause(100_000);
    assert_eq!(release(l.arrive(0, 1500, 52).0).0, 124_608);
    assert_eq!(l.queue_bytes(0), 15_576);
    // Without the pause the queue would hold two packets; with it the
    // third overflows.
    assert_eq!(l.arrive(0, 1500, 52).0, Fate::DropQueue);
}

#[test]
fn rate_spaces_departures_by_wire_time() {
    // 1500 B IP + 38 B framing = 12304 bits = 12.304 µs at 1 Gbit/s.
    let mut l = Link::new(&shaping(0, Some(1_000_000_000)), 1500, 1).unwrap();
    let mut prev = 0;
    for k in 1..=1000u64 {
        let (d, r) = release(l.arrive(0, 1500, 52).0);
        assert_eq!(d, k * 12_304);
        assert_eq!(r, d);
        assert_eq!(d - prev, 12_304);
        prev = d;
    }
    // An idle link starts serialising at the arrival.
    let (d, _) = release(l.arrive(20_000_000, 1500, 52).0);
    assert_eq!(d, 20_000_000 + 12_304);
}

#[test]
fn fractional_wire_times_do_not_drift() {
    // 1538 B at 3 Gbit/s = 4101.33 ns: 3000 packets take exactly 12.304 ms.
    let mut l = Link::new(&shaping(0, Some(3_000_000_000)), 1500, 1).unwrap();
    let mut last = 0;
    for _ in 0..3000 {
        last = release(l.arrive(0, 1500, 52).0).0;
    }
    assert_eq!(last, 12_304_000);
}

#[test]
fn delay_adds_to_departure() {
    let mut l = Link::new(&shaping(25_000, None), 1500, 1).unwrap();
    assert_eq!(release(l.arrive(1_000, 100, 40).0), (1_000, 25_001_000));
    let mut l = Link::new(&shaping(25_000, Some(1_000_000_000)), 1500, 1).unwrap();
    assert_eq!(release(l.arrive(0, 1500, 52).0), (12_304, 25_012_304));
}

#[test]
fn jitter_never_reorders() {
    let s = Shaping {
        delay_us: 10_000,
        jitter_us: 5_000,
        ..Shaping::default()
    };
    let mut l = Link::new(&s, 1500, 7).unwrap();
    let (mut prev, mut min_extra, mut max_extra) = (0, u64::MAX, 0);
    for i in 0..10_000u64 {
        let a = i * 1_000;
        let (_, r) = release(l.arrive(a, 1500, 52).0);
        assert!(r >= prev, "release went back in time");
        assert!(r >= a + 10_000_000);
        let extra = r - a - 10_000_000;
        min_extra = min_extra.min(extra);
        max_extra = max_extra.max(extra);
        prev = r;
    }
    // Jitter is really applied, and clamping keeps it within a few jitters.
    assert!(max_extra > 4_000_000, "max extra {max_extra}");
    assert!(max_extra <= 5_000_000 + 5_000_000, "max extra {max_extra}");
    assert!(min_extra < 5_000_000);
}

#[test]
fn drop_tail_at_the_queue_limit() {
    let s = Shaping {
        rate_bps: Some(1_000_000_000),
        queue_limit_bytes: Some(10 * 1538),
        ..Shaping::default()
    };
    let mut l = Link::new(&s, 1500, 1).unwrap();
    let fates: Vec<Fate> = (0..20).map(|_| l.arrive(0, 1500, 52).0).collect();
    let kept = fates
        .iter()
        .filter(|f| matches!(f, Fate::Release { .. }))
        .count();
    assert_eq!(kept, 10);
    assert!(fates[10..].iter().all(|f| *f == Fate::DropQueue));
    match fates[9] {
        Fate::Release { queue_bytes, .. } => assert_eq!(queue_bytes, 10 * 1538),
        f => panic!("{f:?}"),
    }
    // One wire time later there is room for exactly one more.
    assert!(matches!(l.arrive(12_304, 1500, 52).0, Fate::Release { .. }));
    assert_eq!(l.arrive(12_304, 1500, 52).0, Fate::DropQueue);
    // Once drained the queue is empty again.
    assert_eq!(l.queue_bytes(11 * 12_304), 0);
    // An empty queue takes a packet bigger than the limit (a GSO burst).
    assert!(matches!(
        l.arrive(1_000_000, 60_000, 52).0,
        Fate::Release { .. }
    ));
}

#[test]
fn no_rate_means_no_queue_drops() {
    let s = Shaping {
        queue_limit_bytes: Some(1000),
        ..Shaping::default()
    };
    let mut l = Link::new(&s, 1500, 1).unwrap();
    for _ in 0..100 {
        assert!(matches!(l.arrive(0, 1500, 52).0, Fate::Release { .. }));
    }
}

#[test]
fn loss_fraction_within_bounds() {
    let s = Shaping {
        loss: 0.01,
        ..Shaping::default()
    };
    let n = 100_000u64;
    let mut l = Link::new(&s, 1500, 42).unwrap();
    let lost = (0..n)
        .filter(|&i| l.arrive(i, 1500, 52).0 == Fate::DropLoss)
        .count() as f64;
    // Binomial: mean 1000, sd 31.5; allow 4 sd.
    assert!((lost - 1000.0).abs() < 4.0 * 31.5, "lost {lost}");
    // Same seed, same draws.
    let mut a = Link::new(&s, 1500, 42).unwrap();
    let mut b = Link::new(&s, 1500, 42).unwrap();
    for i in 0..1000 {
        assert_eq!(a.arrive(i, 1500, 52).0, b.arrive(i, 1500, 52).0);
    }
    let all = Shaping {
        loss: 1.0,
        ..Shaping::default()
    };
    let mut l = Link::new(&all, 1500, 3).unwrap();
    assert!((0..1000).all(|i| l.arrive(i, 1500, 52).0 == Fate::DropLoss));
}

#[test]
fn gso_segment_counting() {
    // 10 full segments of 1448 B payload behind 52 B of headers.
    let w = wire_size(52 + 10 * 1448, 52, 1500);
    assert_eq!(w.segments, 10);
    assert_eq!(w.wire_bytes, 10 * 1538);
    // A partial last segment.
    let w = wire_size(52 + 10 * 1448 + 1, 52, 1500);
    assert_eq!(w.segments, 11);
    assert_eq!(w.wire_bytes, 52 + 10 * 1448 + 1 + 11 * 38 + 10 * 52);
    // Packets that fit the MTU are one frame; tiny and odd ones too.
    assert_eq!(
        wire_size(1500, 52, 1500),
        WireSize {
            segments: 1,
            wire_bytes: 1538
        }
    );
    assert_eq!(
        wire_size(40, 52, 1500),
        WireSize {
            segments: 1,
            wire_bytes: 78
        }
    );
    assert_eq!(wire_size(100, 200, 150).segments, 1);
    // A super-packet costs its segments' wire time at the bottleneck.
    let mut l = Link::new(&shaping(0, Some(1_000_000_000)), 1500, 1).unwrap();
    assert_eq!(release(l.arrive(0, 52 + 10 * 1448, 52).0).0, 10 * 12_304);
}

#[test]
fn header_lengths_from_the_copied_bytes() {
    let mut tcp = [0u8; 64];
    tcp[0] = 0x45;
    tcp[9] = 6;
    tcp[20 + 12] = 8 << 4; // data offset 32 B (timestamps)
    assert_eq!(header_len(&tcp), Some(52));
    let mut udp = tcp;
    udp[9] = 17;
    assert_eq!(header_len(&udp), Some(28));
    assert_eq!(header_len(&tcp[..30]), None);
    assert_eq!(header_len(&[]), None);
    let mut icmp = tcp;
    icmp[9] = 1;
    assert_eq!(header_len(&icmp), None);
    let mut bad = tcp;
    bad[0] = 0x42; // IHL 8 bytes
    assert_eq!(header_len(&bad), None);
}

#[test]
fn bad_shaping_is_an_error() {
    let lossy = Shaping {
        loss: 1.5,
        ..Shaping::default()
    };
    assert!(Link::new(&lossy, 1500, 1).is_err());
    let nan = Shaping {
        loss: f64::NAN,
        ..Shaping::default()
    };
    assert!(Link::new(&nan, 1500, 1).is_err());
    assert!(Link::new(&shaping(0, Some(0)), 1500, 1).is_err());
    assert!(Link::new(&shaping(u64::MAX, None), 1500, 1).is_err());
    assert_eq!(
        Link::new(&shaping(0, Some(0)), 1500, 1)
            .unwrap_err()
            .to_string(),
        "rate_bps 0: use null for an unlimited rate"
    );
    assert!(Link::new(&shaping(0, None), 0, 1).is_err());
}

#[test]
fn same_queue_twice_is_an_error() {
    let cfg = Config {
        queues: [3, 3],
        mtu: 1500,
        ..Config::default()
    };
    let err = run(&cfg, &AtomicBool::new(false)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the two directions need two queues, got 3 twice"
    );
}

#[test]
fn release_window_is_a_hundredth_of_the_delay_capped() {
    assert_eq!(release_window_ns(0), 0);
    assert_eq!(release_window_ns(500_000), 5_000); // 1 ms RTT: 5 µs
    assert_eq!(release_window_ns(25_000_000), RELEASE_WINDOW_MAX_NS);
    assert_eq!(release_window_ns(u64::MAX), RELEASE_WINDOW_MAX_NS);
}

#[test]
fn kernel_stamps_become_arrivals_on_the_loop_clock() {
    let clock = Clock {
        start_ns: 5_000_000_000,
        started: Instant::now(),
    };
    // Monotonic stamps are taken as they are, relative to the start.
    assert_eq!(clock.arrival(Stamp::Monotonic(5_000_250), 0), Some(250_000));
    // Before the start: not placed.
    assert_eq!(clock.arrival(Stamp::Monotonic(4_999_000), 0), None);
    // Real-time stamps move by the real-time minus monotonic offset.
    let offset = 1_700_000_000_000_000_000i128 - 5_000_000_000;
    assert_eq!(
        clock.arrival(Stamp::Realtime(1_700_000_000_000_100), offset),
        Some(100_000)
    );
    // The live offset is what the clocks say now (within a second).
    let live = clock.realtime_offset();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i128;
    assert!(live > 0 && live < wall, "{live}");
}
