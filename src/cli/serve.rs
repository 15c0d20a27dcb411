//! `linerate serve`: the agent daemon.

use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::control::{agent, target};
use crate::error::{Error, Result};
use crate::units;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on for controllers.
    #[arg(long, default_value = "0.0.0.0:7470")]
    pub listen: SocketAddr,
    /// File whose first line is the shared token (or set LINERATE_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Concurrent tests (from any controllers) before answering "busy".
    #[arg(long, default_value_t = 4)]
    pub max_tests: usize,
    /// Most flows one test may ask for.
    #[arg(long, default_value_t = 10_000)]
    pub max_flows: u32,
    /// Longest test (warm-up + window) one controller may ask for.
    #[arg(long, value_parser = units::parse_duration, default_value = "1h")]
    pub max_duration: Duration,
    /// Serve one controller, then exit (used by the embedded local agent).
    #[arg(long, hide = true)]
    pub once: bool,
    /// Exit when the parent process exits (used by the embedded local agent).
    #[arg(long, hide = true)]
    pub exit_with_parent: bool,
    /// Log nothing but errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Enter this network namespace (/run/netns/NAME) before listening: a lab's server side.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Listen for controllers here, but open every data socket in network namespace NAME (a lab host's agent).
    #[arg(long, value_name = "NAME", hide = true, conflicts_with = "netns")]
    pub data_netns: Option<String>,
    /// Certificate (PEM, leaf first) for TLS tests instead of a generated one; clients verify it with --tls-ca and --tls-name.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

pub fn serve(args: ServeArgs) -> Result<()> {
    let token = target::token(&args.token_file)?;
    if let Some(ns) = &args.netns {
        crate::lab::netns::enter(ns).map_err(Error::Failed)?;
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        crate::engine::tls::load_identity_files(cert, key).map_err(Error::Usage)?;
    }
    if args.exit_with_parent {
        // SAFETY: asks the kernel for SIGTERM when the parent exits.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    }
    let cfg = agent::ServeConfig {
        listen: args.listen,
        token,
        max_tests: args.max_tests.max(1),
        max_flows: args.max_flows,
        max_duration_s: args.max_duration.as_secs_f64(),
        once: args.once,
        data_netns: args.data_netns,
        quiet: args.quiet,
    };
    agent::serve(cfg).map_err(Error::Failed)
}
