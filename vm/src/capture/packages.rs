//! Packages with their installed version, from ONE `dpkg-query` over all
//! the names (the query and parser of the apt backend,
//! [`crate::backend::apt`]), under `--root` pointed at the root's dpkg
//! database. The captured promise is `package "NAME" { version = "V"; }`:
//! `state` is `installed` by default, and the run compares the version
//! exactly as dpkg prints it, so the same root is kept.
//!
//! A Red Hat family root (rpm) is refused with a message saying so: the
//! rpm toolset is a separate piece of work (issue 25 item 1); capturing
//! from it is a follow-up once that toolset is on the main branch.

use super::print::{Promise, Value};
use super::{checked_name, CaptureError};
use crate::backend::{apt, process, sandbox};
use crate::facts::Facts;
use crate::rootfs::RootFs;

pub fn capture(fs: &RootFs, names: &[String]) -> Result<Vec<Promise>, CaptureError> {
    for name in names {
        checked_name("package", name)?;
        if let Some(why) = apt::name_problem(name) {
            return Err(CaptureError::BadName(format!(
                "`{}` is not a Debian package name: {why}",
                name.escape_debug()
            )));
        }
    }
    let family = Facts::gather(fs.path()).os_family;
    if family == "redhat" {
        return Err(CaptureError::Unreadable(
            "this root is of the Red Hat family (rpm): capturing packages from rpm is not \
             available in this policyvm yet; only dpkg roots are captured"
                .to_owned(),
        ));
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let cmd = apt::query(&refs, sandbox(fs.path()));
    let ran = process::run(&cmd).map_err(CaptureError::Unreadable)?;
    // 1: some name is unknown to dpkg (reported below, by name).
    if !matches!(ran.code, Some(0 | 1)) {
        return Err(CaptureError::Unreadable(ran.failure()));
    }
    let known = apt::parse_query(&ran.stdout);
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let installed = known.get(name.as_str()).filter(|k| k.installed());
        let Some(k) = installed else {
            let how = match known.get(name.as_str()) {
                Some(k) => format!("dpkg knows it as `{}`, not installed", k.status),
                None => "dpkg does not know it".to_owned(),
            };
            return Err(CaptureError::NotFound(format!(
                "package `{name}` is not installed in the root ({how})"
            )));
        };
        let mut p = Promise::new("package", name.as_str());
        p.set("version", Value::Str(k.version.clone()));
        out.push(p);
    }
    Ok(out)
}
