use super::fold::overlap;
use super::place::plan;
use super::report::Report;
use crate::model::sample::IntervalSample;
use std::net::IpAddr;

#[test]
fn flows_go_round_robin_over_clients_and_addresses() {
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.1.1".parse().unwrap();
    let p = plan(8, 4, &[(0, a), (0, b)]);
    assert_eq!(p.len(), 8);
    // Each client gets two flows, each address four.
    for c in 0..4 {
        assert_eq!(p.iter().filter(|x| x.client == c).count(), 2);
    }
    assert_eq!(p.iter().filter(|x| x.addr == a).count(), 4);
    assert_eq!(p[5].client, 1);
    assert_eq!(p[5].addr, b);
    // 4 clients on 4 ports: client k always uses port k.
    let ports: Vec<(usize, IpAddr)> = (0..4)
        .map(|i| (0, format!("10.0.{i}.1").parse().unwrap()))
        .collect();
    for x in plan(16, 4, &ports) {
        assert_eq!(ports[x.client].1, x.addr);
    }
}

#[test]
fn fewer_flows_than_hosts_use_the_first_hosts() {
    // 3 clients, servers with 2 and 1 addresses: 2 flows use d1, d2
    // and the first server only.
    let addrs: Vec<(usize, IpAddr)> = vec![
        (0, "10.0.0.1".parse().unwrap()),
        (0, "10.0.1.1".parse().unwrap()),
        (1, "10.0.2.1".parse().unwrap()),
    ];
    let p = plan(2, 2, &addrs[..2]);
    assert_eq!(p, plan(2, 3, &addrs)[..].to_vec());
}

#[test]
fn the_common_window_is_the_overlap() {
    let mut a = Report::default();
    let mut b = Report::default();
    for k in 0..5 {
        a.samples.insert(
            k,
            (
                IntervalSample {
                    index: k,
                    ..Default::default()
                },
                None,
                None,
            ),
        );
    }
    for k in 1..3 {
        b.samples.insert(
            k,
            (
                IntervalSample {
                    index: k,
                    ..Default::default()
                },
                None,
                None,
            ),
        );
    }
    assert_eq!(overlap(&[a, b]), vec![1, 2]);
    assert!(overlap(&[]).is_empty());
}
