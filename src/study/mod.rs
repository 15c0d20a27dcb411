//! Studies: several tests run as one job. For now the built-in quick study.
pub mod quick;
