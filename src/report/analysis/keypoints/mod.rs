//! Key Points and Best Practices: sentences derived from the numbers by
//! rules, each with the option or sysctl that would change the result. Every
//! rule fires only on the evidence it names; the tests (`tests.rs`) feed each one
//! crafted landscapes on both sides of its threshold.
//!
//! One file per topic (throughput, CPU, TLS, the window/RTT model, scp,
//! UDP, memcached, latency, mixed tests, rrul, rpm, the hosts, the evidence itself, several
//! environments); `shared` holds the key point and what the rules share,
//! and this file runs them in the report's order.

mod capacity;
mod cpu;
mod environments;
mod evidence;
mod hosts;
mod latency;
mod memcache;
mod mix;
mod quic;
mod rpm;
mod rrul;
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
pub use self::memcache::{kv_cost, kv_saturation};
pub use self::mix::latency_beside_load;
pub use self::quic::quic_cost;
pub use self::rpm::responsiveness;
pub use self::rrul::{latency_under_load, queue_discipline};
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
        kv_saturation,
        kv_cost,
        crypto_hw_saving,
        crypto_accelerator,
        tail_latency,
        tail_source,
        capacity,
        latency_beside_load,
        latency_under_load,
        queue_discipline,
        responsiveness,
        noise,
        firewall,
        security_state,
        shared_host,
    ];
    rules.iter().flat_map(|r| r(l)).collect()
}
