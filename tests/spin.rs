//! `--spin` in a test binary of its own: cargo runs test binaries one after
//! another, so the spinning client has the machine's cores to itself
//! (beside its agent) instead of sharing them with parallel tests.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn spin_busy_polls_and_is_recorded() {
    // A spinning worker never sleeps: at 1000 requests/s, where a sleeping
    // one is idle nearly all the time, it burns what CPU it gets. Judged
    // against the sleeping run beside it rather than against a whole core:
    // on a host whose other CPU is busy the spinner gets about half of one
    // (measured 0.63 cores with a busy loop on the second CPU).
    let spin = run_json(
        "spin.json",
        "rr --rate 1000 --spin -d 1 --warmup 0.3",
        Duration::from_secs(60),
    );
    assert_eq!(spin["spec"]["spin"], true);
    let calm = run_json(
        "nospin.json",
        "rr --rate 1000 --pacing sleep -d 1 --warmup 0.3",
        Duration::from_secs(60),
    );
    assert_eq!(calm["spec"]["spin"], false);
    let cores = |r: &serde_json::Value| f(&r["iterations"][0]["cpu"]["client"]["process_cores"]);
    let (busy, idle) = (cores(&spin), cores(&calm));
    assert!(u(&spin["iterations"][0]["transactions"]) > 100);
    assert!(
        busy > 0.3 && busy > 4.0 * idle,
        "a spinning client used {busy} cores, a sleeping one {idle}"
    );
}
