//! The agent fetching the blobs of the bundle in force that its cache
//! lacks (issue 22 item 5), from the hubs and mirrors it pulls bundles
//! from, `BASE/blobs/<sha256>`.
//!
//! The transport is untrusted like for bundles (THREATS.md T6, T7): each
//! blob is streamed to a temporary in the cache while its SHA-256 is
//! computed, the read stops at one byte past the size the signed bundle
//! gives, and the temporary takes the blob's name only if its size and
//! digest are the bundle's ([`converge_format::blobs::store`]). A cached
//! blob is never downloaded again: publishing an unchanged 37 MB binary
//! costs a host no blob bytes, and changing one file of a tree one blob.

use std::collections::HashSet;
use std::path::Path;

use converge_format::blobs::{self, OpenError, StoreError};
use converge_format::bundle::format::{BlobRef, Body};

use crate::pull::fetch::Source;

/// What one fetch did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fetched {
    /// Blobs downloaded and stored.
    pub blobs: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Blobs no source could deliver, each with every source's reason.
    /// Their promises fail; the rest of the run goes on.
    pub problems: Vec<String>,
}

/// Fetches into `cache` every blob `body` names that it lacks, trying
/// `sources` in order for each.
pub fn fetch_missing(cache: &Path, body: &Body, sources: &[&dyn Source]) -> Fetched {
    let mut done = Fetched::default();
    let mut seen: HashSet<[u8; 32]> = HashSet::new();
    for blob in body.blobs() {
        if !seen.insert(blob.sha256) {
            continue;
        }
        match blobs::open(cache, blob) {
            Ok(_) => continue,
            Err(OpenError::Missing) => {}
            // A cached copy of the wrong size (a disk error, a hand
            // edit): replaced by a verified download.
            Err(OpenError::Corrupt(_) | OpenError::Io(_)) => {
                let _ = std::fs::remove_file(cache.join(blob.name()));
            }
        }
        match fetch_one(cache, blob, sources) {
            Ok(bytes) => {
                done.blobs = done.blobs.saturating_add(1);
                done.bytes = done.bytes.saturating_add(bytes);
            }
            Err(why) => done.problems.push(why),
        }
    }
    done
}

/// One blob from the first source that delivers it whole and right.
fn fetch_one(cache: &Path, blob: &BlobRef, sources: &[&dyn Source]) -> Result<u64, String> {
    let file = format!("{}/{}", blobs::DIR, blob.name());
    let mut reasons = Vec::new();
    for source in sources {
        let url = source.locate(&file);
        let reader = match source.reader(&file, blob.size) {
            Ok(r) => r,
            Err(e) => {
                reasons.push(e.to_string());
                continue;
            }
        };
        match blobs::store(cache, reader, blob.size, Some(blob)) {
            Ok(_) => return Ok(blob.size),
            Err(e @ (StoreError::TooLong { .. } | StoreError::Mismatch { .. })) => {
                reasons.push(format!("blob {url} refused: {e}"))
            }
            Err(e @ StoreError::Read(_)) => reasons.push(format!("blob {url}: {e}")),
            Err(e @ StoreError::Write { .. }) => {
                return Err(format!(
                    "cannot store blob {} in {}: {e}",
                    blob.name(),
                    cache.display()
                ))
            }
        }
    }
    Err(format!(
        "stored file sha256:{} ({} bytes) not fetched: {}",
        blob.name(),
        blob.size,
        reasons.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::pull::fetch::FetchError;
    use converge_format::bundle::format::Constant;
    use std::cell::RefCell;
    use std::collections::HashMap;

    /// Files by name, counting what is asked for.
    #[derive(Default)]
    struct Served {
        files: HashMap<String, Vec<u8>>,
        asked: RefCell<Vec<String>>,
    }

    impl Source for Served {
        fn locate(&self, file: &str) -> String {
            format!("test:/{file}")
        }
        fn get(&self, file: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
            self.asked.borrow_mut().push(file.to_owned());
            match self.files.get(file) {
                Some(b) if b.len() as u64 > limit.saturating_add(1) => {
                    Ok(b[..=limit as usize].to_vec())
                }
                Some(b) => Ok(b.clone()),
                None => Err(FetchError::Status {
                    url: self.locate(file),
                    status: 404,
                }),
            }
        }
    }

    fn body_naming(blobs: &[BlobRef]) -> Body {
        Body::with_programs(
            blobs
                .iter()
                .map(|b| Constant::BlobRef(Box::new(*b)))
                .collect(),
            Vec::new(),
        )
    }

    fn blob(bytes: &[u8]) -> BlobRef {
        blobs::digest_of(bytes).unwrap()
    }

    #[test]
    fn missing_blobs_are_fetched_once_and_cached_ones_never() {
        let cache = tempfile::tempdir().unwrap();
        let (a, b) = (blob(b"aaaa"), blob(b"bbbb"));
        let mut served = Served::default();
        served
            .files
            .insert(format!("blobs/{}", a.name()), b"aaaa".to_vec());
        served
            .files
            .insert(format!("blobs/{}", b.name()), b"bbbb".to_vec());
        let body = body_naming(&[a, b, a]);
        let first = fetch_missing(cache.path(), &body, &[&served]);
        assert_eq!((first.blobs, first.bytes), (2, 8));
        assert!(first.problems.is_empty());
        let second = fetch_missing(cache.path(), &body, &[&served]);
        assert_eq!(second, Fetched::default());
        assert_eq!(served.asked.borrow().len(), 2);
    }

    #[test]
    fn forged_and_oversized_blobs_are_refused_and_the_next_source_asked() {
        let cache = tempfile::tempdir().unwrap();
        let want = blob(b"good");
        let name = format!("blobs/{}", want.name());
        let mut forged = Served::default();
        forged.files.insert(name.clone(), b"evil".to_vec());
        let mut endless = Served::default();
        endless.files.insert(name.clone(), vec![b'g'; 1000]);
        let body = body_naming(&[want]);
        let failed = fetch_missing(cache.path(), &body, &[&forged, &endless]);
        assert_eq!(failed.blobs, 0);
        let why = &failed.problems[0];
        assert!(why.contains("are not the blob the bundle names"), "{why}");
        assert!(why.contains("more than the 4 bytes"), "{why}");
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
        let mut good = Served::default();
        good.files.insert(name, b"good".to_vec());
        let fixed = fetch_missing(cache.path(), &body, &[&forged, &good]);
        assert_eq!(fixed.blobs, 1);
        assert_eq!(
            std::fs::read(cache.path().join(want.name())).unwrap(),
            b"good"
        );
    }
}
