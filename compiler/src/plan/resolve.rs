//! TEMPORARY until converge-eval lands (s7-ptest).
use super::build::Built;
use super::facts::KnownHost;
use super::resolved::HostPromises;

#[derive(Debug)]
pub struct Policy<'b> {
    built: &'b Built,
}

impl<'b> Policy<'b> {
    pub fn new(built: &'b Built) -> Self {
        Policy { built }
    }

    pub fn resolve(&self, _host: &KnownHost) -> HostPromises {
        let _ = self.built;
        HostPromises::default()
    }
}
