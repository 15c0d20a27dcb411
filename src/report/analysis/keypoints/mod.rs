//! Key Points and Best Practices: sentences derived from the numbers by
//! rules, each with the option or sysctl that would change the result. Every
//! rule fires only on the evidence it names; the tests (`tests.rs`) feed each one
//! crafted landscapes on both sides of its threshold.
//!
//! One file per topic (throughput, CPU, TLS, the window/RTT model, scp,
//! UDP, latency, mixed tests, the hosts, the evidence itself, several
//! environments); `shared` holds what the rules share, and this file runs
//! them in the report's order. A kind's rules on its own figures are the
//! kind's (`Kind::key_points`: memcache, rrul, rpm), run at one place in
//! that order.

mod capacity;
mod cpu;
mod environments;
mod evidence;
mod hosts;
mod latency;
mod mix;
mod quic;
mod scp;
mod security;
mod shared;
#[cfg(test)]
mod tests;
mod throughput;
mod tls;
mod tunnel;
mod udp;
mod window;

pub use self::capacity::capacity;
pub use self::cpu::{cpu_bound, host_saturated, service_demand_trend, transaction_cost};
pub use self::environments::environments;
pub use self::evidence::{missing, noise};
pub use self::hosts::{firewall, shared_host};
pub use self::latency::{against_target, tail_latency, tail_source};
pub use self::mix::latency_beside_load;
pub use self::quic::quic_cost;
pub use self::scp::{scp_channel_window, scp_login};
pub use self::security::security_state;
pub use self::shared::{KeyPoint, MODEL_TOLERANCE};
pub use self::throughput::{scaling_peak, streams_to_line_rate};
pub use self::tls::{crypto_accelerator, crypto_hw_saving, tls_cost};
pub use self::tunnel::tunnel_cost;
pub use self::udp::{udp_batching, udp_receiver_drops};
pub use self::window::{model_mismatch, window_not_proportional, window_or_rate_bound};

pub use self::evidence::{unavailable, window_edges};
use crate::report::analysis::landscape::Landscape;

/// Every kind's own rules over the study's points, in the registry's order.
pub fn kinds(l: &Landscape) -> Vec<KeyPoint> {
    let points = l.views();
    crate::workload::KINDS
        .iter()
        .flat_map(|k| k.key_points(&points))
        .collect()
}

/// Every rule, in the order the report lists them.
pub fn derive(l: &Landscape) -> Vec<KeyPoint> {
    let rules: &[fn(&Landscape) -> Vec<KeyPoint>] = &[
        missing,
        environments,
        streams_to_line_rate,
        scaling_peak,
        cpu_bound,
        host_saturated,
        service_demand_trend,
        window_edges,
        transaction_cost,
        tls_cost,
        quic_cost,
        tunnel_cost,
        window_or_rate_bound,
        window_not_proportional,
        model_mismatch,
        scp_login,
        scp_channel_window,
        udp_receiver_drops,
        udp_batching,
        crypto_hw_saving,
        crypto_accelerator,
        tail_latency,
        tail_source,
        capacity,
        latency_beside_load,
        kinds,
        noise,
        firewall,
        security_state,
        shared_host,
    ];
    rules.iter().flat_map(|r| r(l)).collect()
}
