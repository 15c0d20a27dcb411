//! `linerate crypto`: per-core cipher speed with the TLS backends' libraries
//! and what the CPU offers.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

use super::write_json;
use crate::error::{usage, Result};
use crate::units;

#[derive(Args, Debug)]
pub struct CryptoArgs {
    /// Time spent on each cipher and record size.
    #[arg(long, value_parser = units::parse_duration, default_value = "200ms")]
    pub each: Duration,
    /// Also write the measurements as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Use the CPU's crypto extensions (on), or mask AES-NI, PCLMULQDQ, SHA, VAES and VPCLMULQDQ from the crypto libraries (off: software crypto, the seeds' "crypto hardware off").
    #[arg(long, value_parser = crate::model::options::Switch::parse, value_name = "on|off", default_value = "on")]
    pub hw: crate::model::options::Switch,
}

pub fn crypto(a: CryptoArgs) -> Result<()> {
    if let Some(p) = &a.json {
        super::check_file(p, "--json")?;
    }
    if a.each > Duration::from_secs(10) {
        return Err(usage("--each is capped at 10 s"));
    }
    let masked = crate::measure::crypto::hw_masked();
    if !a.hw.0 && !masked {
        return super::rerun_masked();
    }
    if a.hw.0 && std::env::var_os("OPENSSL_ia32cap").is_some() {
        return Err(usage(
            "--hw on, but OPENSSL_ia32cap is set in the environment: unset it to measure with the hardware",
        ));
    }
    let r = crate::measure::crypto::report(a.each, crate::measure::host::collect());
    if r.hw_masked {
        println!(
            "crypto hardware masked: OPENSSL_ia32cap={}",
            crate::measure::crypto::HW_OFF_MASK
        );
    }
    println!("cpu      {}", r.cpu_model);
    println!(
        "features {}",
        if r.cpu_flags.is_empty() {
            "none of aes, vaes, pclmulqdq, vpclmulqdq, sha_ni, avx2, avx512f".to_string()
        } else {
            r.cpu_flags.join(" ")
        }
    );
    println!("\none core, sealing records (GB/s of plaintext):");
    let sizes = crate::measure::crypto::RECORD_SIZES;
    print!("{:<38}", "library / cipher");
    for s in sizes {
        print!(" {:>9}", units::fmt_size_arg(*s as u64));
    }
    println!();
    let mut rows: Vec<(String, String)> = Vec::new();
    for s in &r.speeds {
        let k = (s.library.clone(), s.cipher.clone());
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    for (lib, cipher) in rows {
        print!("{:<38}", format!("{lib} {cipher}"));
        for size in sizes {
            let v = r
                .speeds
                .iter()
                .find(|s| s.library == lib && s.cipher == cipher && s.record_bytes == *size)
                .map(|s| format!("{:.2}", s.bytes_per_s / 1e9))
                .unwrap_or_else(|| "-".into());
            print!(" {v:>9}");
        }
        println!();
    }
    println!("\none core, signatures per second (a TLS server signs once per full handshake):");
    for g in &r.signs {
        println!(
            "{:<38} {:>9.0}",
            format!("{} {}", g.library, g.algorithm),
            g.signs_per_s
        );
    }
    println!("\n{}", r.verdict);
    if let Some(p) = &a.json {
        write_json(p, &r)?;
    }
    Ok(())
}
