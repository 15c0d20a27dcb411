use super::*;

fn nlmsg(kind: u16, seq: u32, body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(body);
    while !b.len().is_multiple_of(4) {
        b.push(0);
    }
    b
}

fn packet_msg(num: u16, id: u32, cap_len: Option<u32>, payload: &[u8]) -> Vec<u8> {
    let mut body = vec![libc::AF_INET as u8, 0];
    body.extend_from_slice(&num.to_be_bytes());
    let mut hdr = id.to_be_bytes().to_vec();
    hdr.extend_from_slice(&[0x08, 0x00, 2]);
    put_attr(&mut body, NFQA_PACKET_HDR, &hdr);
    if let Some(c) = cap_len {
        put_attr(&mut body, NFQA_CAP_LEN, &c.to_be_bytes());
    }
    put_attr(&mut body, NFQA_SKB_INFO, &NFQA_SKB_GSO.to_be_bytes());
    put_attr(&mut body, NFQA_PAYLOAD, payload);
    nlmsg(MSG_PACKET, 0, &body)
}

fn parse_all(buf: &[u8], num: u16) -> Vec<Message> {
    let mut v = Vec::new();
    parse_datagram(buf, &mut |m| match &m {
        Message::Packet(p) if p.queue != num => {}
        _ => v.push(m),
    });
    v
}

#[test]
fn several_packets_and_an_error_in_one_datagram() {
    let payload = [0x45u8; 64];
    let mut d = packet_msg(3, 7, Some(64_000), &payload);
    d.extend(packet_msg(3, 8, None, &payload[..40]));
    d.extend(packet_msg(4, 9, None, &payload)); // another queue: ignored
    d.extend(nlmsg(NLMSG_ERROR, 42, &(-libc::ENOENT).to_ne_bytes()));
    // A failure that echoes its request names the request's queue.
    let mut echo = (-libc::EPERM).to_ne_bytes().to_vec();
    let mut request = Vec::new();
    put_verdict(&mut request, MSG_VERDICT, 43, 4, 1, 9);
    echo.extend_from_slice(&request);
    d.extend(nlmsg(NLMSG_ERROR, 43, &echo));
    assert_eq!(parse_all(&d, 4).len(), 3); // queue 4's packet, both errors
    let msgs = parse_all(&d, 3);
    assert_eq!(msgs.len(), 4);
    match &msgs[0] {
        Message::Packet(p) => {
            assert_eq!((p.queue, p.id, p.len, p.gso), (3, 7, 64_000, true));
            assert_eq!(p.head().len(), 64);
        }
        m => panic!("unexpected {m:?}"),
    }
    match &msgs[1] {
        Message::Packet(p) => assert_eq!((p.id, p.len, p.head().len()), (8, 40, 40)),
        m => panic!("unexpected {m:?}"),
    }
    assert_eq!(
        msgs[2],
        Message::Ack {
            seq: 42,
            errno: libc::ENOENT,
            queue: None,
        }
    );
    assert_eq!(
        msgs[3],
        Message::Ack {
            seq: 43,
            errno: libc::EPERM,
            queue: Some(4),
        }
    );
}

#[test]
fn timestamps_are_read_and_their_clock_told_apart() {
    let stamped = |sec: u64, usec: u64| {
        let mut body = vec![libc::AF_INET as u8, 0, 0, 0];
        put_attr(&mut body, NFQA_PACKET_HDR, &[0, 0, 0, 9, 8, 0, 2]);
        let mut ts = sec.to_be_bytes().to_vec();
        ts.extend_from_slice(&usec.to_be_bytes());
        put_attr(&mut body, NFQA_TIMESTAMP, &ts);
        put_attr(&mut body, NFQA_PAYLOAD, &[0x45u8; 20]);
        match parse_all(&nlmsg(MSG_PACKET, 0, &body), 0).pop() {
            Some(Message::Packet(p)) => p.stamp,
            m => panic!("unexpected {m:?}"),
        }
    };
    // Uptime-sized seconds: the monotonic clock (TCP departure stamps).
    assert_eq!(stamped(3_600, 5), Some(Stamp::Monotonic(3_600_000_005)));
    // Seconds since 1970: a real-time receive stamp.
    assert_eq!(
        stamped(1_763_900_000, 250_000),
        Some(Stamp::Realtime(1_763_900_000_250_000))
    );
    // Nonsense microseconds and a zero stamp are no stamp.
    assert_eq!(stamped(10, 1_000_000), None);
    assert_eq!(stamped(0, 0), None);
    // A packet without the attribute has none.
    let p = packet_msg(0, 1, None, &[0u8; 20]);
    match parse_all(&p, 0).pop() {
        Some(Message::Packet(p)) => assert_eq!(p.stamp, None),
        m => panic!("unexpected {m:?}"),
    }
}

#[test]
fn malformed_datagrams_are_skipped() {
    let mut d = packet_msg(0, 1, None, &[0u8; 20]);
    assert!(parse_all(&d[..10], 0).is_empty());
    d[0] = 0xff; // length beyond the datagram
    assert!(parse_all(&d, 0).is_empty());
    let mut bad_attr = packet_msg(0, 1, None, &[0u8; 20]);
    bad_attr[NLMSG_HDRLEN + NFGENMSG_LEN] = 200; // attribute longer than the message
    assert!(parse_all(&bad_attr, 0).is_empty());
}

#[test]
fn verdict_and_config_layout() {
    let mut b = Vec::new();
    put_verdict(&mut b, MSG_VERDICT_BATCH, 5, 1, 1, 0x01020304);
    assert_eq!(b.len(), VERDICT_MSG_LEN);
    assert_eq!(ne32(&b).unwrap() as usize, VERDICT_MSG_LEN);
    assert_eq!(ne16(&b[4..]).unwrap(), 0x0303);
    assert_eq!(&b[18..20], &[0, 1]); // res_id = queue 1, big-endian
    assert_eq!(&b[24..32], &[0, 0, 0, 1, 1, 2, 3, 4]);
    let c = config_msg(2, 9, true);
    assert_eq!(ne32(&c).unwrap() as usize, c.len());
    assert_eq!(c.len() % 4, 0);
    assert_eq!(ne16(&c[6..]).unwrap(), NLM_F_REQUEST | NLM_F_ACK);
}

#[test]
fn marked_verdicts_are_longer_and_sends_split_between_messages() {
    let mut b = Vec::new();
    put_verdict_marked(&mut b, MSG_VERDICT, 1, 0, 1, 7, Some(0x10000));
    assert_eq!(b.len(), VERDICT_MSG_LEN + NLA_HDRLEN + 4);
    assert_eq!(ne16(&b[VERDICT_MSG_LEN + 2..]).unwrap(), NFQA_MARK);
    assert_eq!(&b[VERDICT_MSG_LEN + 4..], &[0, 1, 0, 0]);
    for k in 0..4u32 {
        put_verdict(&mut b, MSG_VERDICT, 2 + k, 0, 1, k);
        put_verdict_marked(&mut b, MSG_VERDICT, 9 + k, 0, 1, k, Some(1));
    }
    let runs = message_runs(&b, 2);
    assert_eq!(runs.len(), 5);
    assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), b.len());
    for r in &runs {
        // Each run starts with a whole message.
        assert!(ne32(r).unwrap() as usize <= r.len());
    }
    assert!(message_runs(&[], 4).is_empty());
}

#[test]
fn proc_counters() {
    let text = "    0  12345     3 2    64     0     5   100  1\n    1  12346     0 2    64     7     0    20  1\n";
    assert_eq!(
        parse_kernel_counters(text, 1),
        Some(KernelCounters {
            held: 0,
            queue_dropped: 7,
            user_dropped: 0
        })
    );
    assert_eq!(parse_kernel_counters(text, 2), None);
}
