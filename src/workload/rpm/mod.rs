//! The IETF responsiveness test ("Responsiveness under Working
//! Conditions", draft-ietf-ippm-responsiveness: RPM, round trips per
//! minute), as Apple's `networkQuality` and goresponsiveness run it.
//!
//! Its client (`linerate run rpm`, `client`, with the draft's arithmetic in
//! `method`) and its server (`linerate serve --rpm`): the
//! configuration at `/.well-known/nq` and the three objects the draft
//! asks for, a small download, an endless large download and an upload
//! sink, over HTTP/2 with TLS (or clear, for hosts without TLS), so that
//! any RPM client can test against a linerate agent.

pub mod client;
pub mod kind;
pub mod method;
pub mod server;
