//! `--spin` in a test binary of its own: cargo runs test binaries one after
//! another, so the spinning client has the machine's cores to itself
//! (beside its agent) instead of sharing them with parallel tests.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn spin_busy_polls_and_is_recorded() {
    // A spinning worker never sleeps: its thread is on CPU the whole window
    // even though 1/1 rr leaves it waiting for the peer most of the time.
    let r = run_json(
        "spin.json",
        "rr --spin -d 1 --warmup 0.3",
        Duration::from_secs(60),
    );
    assert_eq!(r["spec"]["spin"], true);
    let it = &r["iterations"][0];
    assert!(u(&it["transactions"]) > 100);
    let busy = f(&it["cpu"]["client"]["process_cores"]);
    assert!(busy > 0.8, "a spinning client used {busy} cores");
    let calm = run_json(
        "nospin.json",
        "rr -d 1 --warmup 0.3",
        Duration::from_secs(60),
    );
    assert_eq!(calm["spec"]["spin"], false);
}
