//! rpm's version comparison, in Rust: `rpmvercmp` (rpm 4.18,
//! `rpmio/rpmvercmp.c`) over one version or release string, and
//! [`compare_evr`] over `epoch:version-release`. Implemented here rather
//! than asked of `rpm --eval '%{lua: ...}'` so that comparing 200 versions
//! starts no process; its unit test runs rpm's own test vectors
//! (`rpmvercmp.txt`), and `tests/toolsets.rs` checks the same vectors
//! against the real rpm.

use std::cmp::Ordering;

/// rpm's comparison of two version (or release) strings: runs of digits
/// compare as numbers, runs of letters as text, a number is newer than
/// letters, `~` sorts before everything (even the end: `1.0~rc1` <
/// `1.0`), `^` after the end but before anything else (`1.0` < `1.0^git1`
/// < `1.0.1`); other characters only separate.
pub fn rpmvercmp(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (mut one, mut two) = (a.as_bytes(), b.as_bytes());
    let separator = |c: &u8| !c.is_ascii_alphanumeric() && *c != b'~' && *c != b'^';
    loop {
        one = skip_while(one, separator);
        two = skip_while(two, separator);
        let (c1, c2) = (one.first().copied(), two.first().copied());
        if c1.is_none() && c2.is_none() {
            return Ordering::Equal;
        }
        if c1 == Some(b'~') || c2 == Some(b'~') {
            if c1 != Some(b'~') {
                return Ordering::Greater;
            }
            if c2 != Some(b'~') {
                return Ordering::Less;
            }
            one = one.get(1..).unwrap_or_default();
            two = two.get(1..).unwrap_or_default();
            continue;
        }
        if c1 == Some(b'^') || c2 == Some(b'^') {
            if c1.is_none() {
                return Ordering::Less;
            }
            if c2.is_none() {
                return Ordering::Greater;
            }
            if c1 != Some(b'^') {
                return Ordering::Greater;
            }
            if c2 != Some(b'^') {
                return Ordering::Less;
            }
            one = one.get(1..).unwrap_or_default();
            two = two.get(1..).unwrap_or_default();
            continue;
        }
        let (Some(first), Some(_)) = (c1, c2) else {
            // One ran out: the one with something left is newer.
            return if c1.is_none() {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        };
        let numeric = first.is_ascii_digit();
        let class = |c: &u8| {
            if numeric {
                c.is_ascii_digit()
            } else {
                c.is_ascii_alphabetic()
            }
        };
        let (seg1, rest1) = split_while(one, class);
        let (seg2, rest2) = split_while(two, class);
        if seg1.is_empty() {
            // Cannot happen (`first` is of its class); rpm answers -1.
            return Ordering::Less;
        }
        if seg2.is_empty() {
            // A number against letters: the number is newer.
            return if numeric {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let order = if numeric {
            let s1 = skip_while(seg1, |c| *c == b'0');
            let s2 = skip_while(seg2, |c| *c == b'0');
            s1.len().cmp(&s2.len()).then_with(|| s1.cmp(s2))
        } else {
            seg1.cmp(seg2)
        };
        if order != Ordering::Equal {
            return order;
        }
        one = rest1;
        two = rest2;
    }
}

fn skip_while(s: &[u8], pred: impl Fn(&u8) -> bool) -> &[u8] {
    split_while(s, pred).1
}

fn split_while(s: &[u8], pred: impl Fn(&u8) -> bool) -> (&[u8], &[u8]) {
    let n = s.iter().take_while(|c| pred(c)).count();
    s.split_at_checked(n).unwrap_or((s, &[]))
}

/// An rpm version as `[EPOCH:]VERSION[-RELEASE]`, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evr<'a> {
    /// `None` when not written (an installed package's is `Some`, 0 by
    /// default).
    pub epoch: Option<u64>,
    pub version: &'a str,
    pub release: Option<&'a str>,
}

impl<'a> Evr<'a> {
    /// Splits `E:V-R` (the epoch before the first `:`, the release after
    /// the last `-`). `None` when the epoch is not a number.
    pub fn parse(text: &'a str) -> Option<Evr<'a>> {
        let (epoch, rest) = match text.split_once(':') {
            Some((e, rest)) => (Some(e.parse::<u64>().ok()?), rest),
            None => (None, text),
        };
        let (version, release) = match rest.rsplit_once('-') {
            Some((v, r)) => (v, Some(r)),
            None => (rest, None),
        };
        Some(Evr {
            epoch,
            version,
            release,
        })
    }
}

/// Compares two full versions as rpm does (`rpmVersionCompare`): epoch
/// (missing is 0), then version, then release (a missing release is
/// older than any).
pub fn compare_evr(a: &Evr<'_>, b: &Evr<'_>) -> Ordering {
    a.epoch
        .unwrap_or(0)
        .cmp(&b.epoch.unwrap_or(0))
        .then_with(|| rpmvercmp(a.version, b.version))
        .then_with(|| match (a.release, b.release) {
            (Some(x), Some(y)) => rpmvercmp(x, y),
            (x, y) => x.is_some().cmp(&y.is_some()),
        })
}

/// Whether the installed `E:V-R` is the version a promise asks for: the
/// parts the promise writes must compare equal (`1.0` matches `1.0-3` and
/// `2:1.0-3`; `0:1.0` matches only epoch 0; `1.0-3` only that release).
pub fn matches(installed: &Evr<'_>, wanted: &Evr<'_>) -> bool {
    let epoch = wanted
        .epoch
        .is_none_or(|e| e == installed.epoch.unwrap_or(0));
    let release = wanted.release.is_none_or(|r| {
        installed
            .release
            .is_some_and(|i| rpmvercmp(i, r) == Ordering::Equal)
    });
    epoch && release && rpmvercmp(installed.version, wanted.version) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every vector of rpm's own test suite.
    #[test]
    fn rpms_test_vectors() {
        let vectors = include_str!("rpmvercmp.txt");
        let mut n = 0;
        for line in vectors.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split(' ').collect();
            let [a, b, expected] = f.as_slice() else {
                panic!("bad vector line {line:?}");
            };
            let expected = match *expected {
                "-1" => Ordering::Less,
                "0" => Ordering::Equal,
                _ => Ordering::Greater,
            };
            assert_eq!(rpmvercmp(a, b), expected, "rpmvercmp({a}, {b})");
            n += 1;
        }
        assert!(n > 90, "{n} vectors");
    }

    #[test]
    fn epoch_version_release() {
        let p = |s| Evr::parse(s).unwrap();
        assert_eq!(
            p("2:3.0-1.el9"),
            Evr {
                epoch: Some(2),
                version: "3.0",
                release: Some("1.el9")
            }
        );
        assert_eq!(Evr::parse("x:1.0"), None);
        // The epoch wins over everything.
        assert_eq!(compare_evr(&p("1:1.0-1"), &p("9.0-1")), Ordering::Greater);
        assert_eq!(compare_evr(&p("0:1.0-1"), &p("1.0-1")), Ordering::Equal);
        assert_eq!(compare_evr(&p("1.0-10"), &p("1.0-9")), Ordering::Greater);
        assert_eq!(compare_evr(&p("1.0"), &p("1.0-1")), Ordering::Less);
        // What a promise writes is what must match.
        assert!(matches(&p("2:3.0-1"), &p("3.0")));
        assert!(matches(&p("2:3.0-1"), &p("2:3.0")));
        assert!(matches(&p("2:3.0-1"), &p("3.00-1")));
        assert!(!matches(&p("2:3.0-1"), &p("0:3.0")));
        assert!(!matches(&p("2:3.0-1"), &p("3.0-2")));
        assert!(!matches(&p("1.0-1"), &p("1.0.1")));
    }
}
