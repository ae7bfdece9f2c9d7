//! UTC timestamps as stamps write them, `2026-11-22T00:55:00Z`, to and from
//! UNIX seconds. One canonical spelling per instant (no offsets, no
//! fractions), so that a stamp's bytes follow from its fields.
//!
//! The calendar arithmetic cannot overflow: every input is a `u64` of
//! seconds (at most about 2.1e14 days, far inside `i64` after the products
//! below) or a parsed date of at most four-digit years.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "bounded calendar arithmetic, see the module comment"
)]

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count (`civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds of `30s`, `30m`, `12h`, `7d` or `2w` (`0s` included), as
/// `policyc publish --expires` and the agent's configuration write them.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "`{text}` is not a duration like `30s`, `12h` or `7d`"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a duration like `30s`, `12h` or `7d`"))
}

/// `secs` as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The UNIX seconds of a canonical `YYYY-MM-DDTHH:MM:SSZ` (years 1970 to
/// 9999), or `None` for anything else, including impossible dates.
pub fn parse_utc(text: &str) -> Option<u64> {
    let b: &[u8; 20] = text.as_bytes().try_into().ok()?;
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        let s = text.get(from..to)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if y < 1970 || !(1..=12).contains(&m) || d == 0 || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    // An impossible day (February 30th) does not come back the same.
    if civil_from_days(days) != (i64::from(y), m, d) {
        return None;
    }
    let secs = days * 86_400 + i64::from(hh * 3600 + mm * 60 + ss);
    u64::try_from(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_795_308_900), "2026-11-22T00:55:00Z");
        assert_eq!(parse_utc("2026-11-22T00:55:00Z"), Some(1_795_308_900));
        assert_eq!(parse_utc("2000-02-29T00:00:00Z"), Some(951_782_400));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0s"), Ok(0));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("5m"), Ok(300));
        assert_eq!(parse_duration("7d"), Ok(604_800));
        assert_eq!(parse_duration("2w"), Ok(1_209_600));
        for bad in [
            "",
            "5",
            "m",
            "5 m",
            "-5m",
            "+5m",
            "5y",
            "99999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration("30500568904944w").is_err(), "overflow");
    }

    #[test]
    fn round_trips_over_the_range() {
        let mut secs = 0u64;
        while secs < 253_402_300_799 {
            assert_eq!(parse_utc(&format_utc(secs)), Some(secs), "{secs}");
            secs += 7_777_777;
        }
        assert_eq!(format_utc(253_402_300_799), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn anything_not_canonical_is_refused() {
        for bad in [
            "",
            "2026-11-22 00:55:00Z",
            "2026-11-22T00:55:00",
            "2026-11-22T00:55:00+00:00",
            "2026-11-22T00:55:00.5Z",
            "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-22T24:00:00Z",
            "2026-11-22T00:60:00Z",
            "1969-12-31T23:59:59Z",
            "+026-11-22T00:55:00Z",
            "2026-1a-22T00:55:00Z",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
    }
}
