//! Packages with their installed version, from ONE query of the root's
//! toolset over all the names (`dpkg-query`, `rpm -q`: the query a run
//! makes, `crate::backend::toolset`), under `--root` pointed at the root's
//! package database. The captured promise is `package "NAME" { version =
//! "V"; }`: `state` is `installed` by default, and the run compares the
//! version as the toolset does, so the same root is kept. On a Red Hat
//! family root the version is rpm's `[EPOCH:]VERSION-RELEASE` (epoch 0
//! left out, the newest of several installed versions), which the run's
//! rpmvercmp matches exactly.

use super::print::{Promise, Value};
use super::{checked_name, CaptureError};
use crate::backend::{sandbox, toolset};
use crate::rootfs::RootFs;

pub fn capture(fs: &RootFs, names: &[String]) -> Result<Vec<Promise>, CaptureError> {
    let toolset = toolset::reader_of_root(fs).map_err(CaptureError::Unreadable)?;
    for name in names {
        checked_name("package", name)?;
        if let Some(why) = toolset.name_problem(name) {
            return Err(CaptureError::BadName(format!(
                "`{}` is not a package name for {}: {why}",
                name.escape_debug(),
                toolset.name()
            )));
        }
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let known = toolset
        .query(&refs, sandbox(fs.path()))
        .map_err(|e| CaptureError::Unreadable(e.0))?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let installed = known.get(name.as_str()).filter(|k| k.installed());
        let Some(k) = installed else {
            let how = match known.get(name.as_str()) {
                Some(k) => format!("the package database says `{}`, not installed", k.status),
                None => "the package database does not know it".to_owned(),
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
