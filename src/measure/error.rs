//! What reading the machine can fail at: a kernel interface refused, a
//! tool missing or silent, a peer's histogram unreadable. None of it is the
//! user's input, so every variant exits as a failure (1) at the roof.

/// A measurement that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The sock_diag netlink socket refused (socket, send or receive).
    #[error("sock_diag: {0}")]
    SockDiag(std::io::Error),
    /// The kernel answered the dump with a netlink error.
    #[error("sock_diag: the kernel refused the dump")]
    DumpRefused,
    /// A latency histogram of odd or excessive length.
    #[error("a latency histogram of odd or excessive length")]
    HistogramLength,
    #[error("a latency histogram that is not hex: {0}")]
    HistogramHex(std::num::ParseIntError),
    /// hdrhistogram's own complaints, in their Debug form.
    #[error("an unreadable latency histogram: {0:?}")]
    HistogramUnreadable(hdrhistogram::serialization::DeserializeError),
    #[error("a latency histogram out of range: {0:?}")]
    HistogramRange(hdrhistogram::AdditionError),
    #[error("CPU {0} is beyond CPU_SETSIZE")]
    CpuBeyondSet(usize),
    /// sched_setaffinity refused: the CPUs asked for, why, and the CPUs
    /// this process may use.
    #[error("cannot pin to CPUs {cpus:?}: {source} (this machine has CPUs {allowed})")]
    Pin {
        cpus: Vec<usize>,
        source: std::io::Error,
        allowed: String,
    },
    #[error("nft not installed")]
    NftMissing,
    #[error("nft did not answer")]
    NftSilent,
    #[error("nft output unreadable")]
    NftUnreadable,
    #[error("nftables rules need root to list")]
    NftNeedsRoot,
    /// A cipher the crypto library here does not have, or one that failed.
    #[error("cipher {algorithm}: {source}")]
    Cipher {
        algorithm: String,
        source: CipherError,
    },
}

/// Why a cipher or signature could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum CipherError {
    /// aws-lc-rs refused to make a key, or to sign (it says no more).
    #[error("{0}")]
    Library(aws_lc_rs::error::Unspecified),
    #[error("unknown to this build ({0})")]
    Unknown(String),
    /// An operation failed while it was being timed.
    #[error("the library refused an operation")]
    Refused,
}

/// Nothing measure refuses is the user's input: exit 1.
impl From<MeasureError> for crate::error::Error {
    fn from(e: MeasureError) -> Self {
        crate::error::Error::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_messages_are_unchanged() {
        let e = MeasureError::Cipher {
            algorithm: "rot13".into(),
            source: CipherError::Unknown("rot13".into()),
        };
        assert_eq!(e.to_string(), "cipher rot13: unknown to this build (rot13)");
        let e = MeasureError::Cipher {
            algorithm: "aes128-gcm".into(),
            source: CipherError::Refused,
        };
        assert_eq!(
            crate::error::Error::from(e),
            crate::error::Error::Failed(
                "cipher aes128-gcm: the library refused an operation".into()
            )
        );
        assert_eq!(
            CipherError::Library(aws_lc_rs::error::Unspecified).to_string(),
            aws_lc_rs::error::Unspecified.to_string()
        );
    }
}
