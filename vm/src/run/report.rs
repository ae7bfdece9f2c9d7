//! The run report: JSON for CI and dashboards (the shape of issue 6:
//! `bundle`, `host`, `passes`, `converged`, `duration_ms`, `summary`,
//! `promises`, `unmanaged`), and one line per change or failure for people.

use serde_json::{json, Value};

use super::operators::Outcome;
use super::RunReport;
use crate::rootfs::printable;

/// Text from the host (a link's target, an error, file content in a diff)
/// with its control characters escaped, line by line: no name or content
/// can write a report line of its own or a terminal escape sequence.
fn printable_lines(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(line) => format!("{}\n", printable(line)),
            None => printable(line).into_owned(),
        })
        .collect()
}

/// The lines of one repair: `VERB HEAD: WHAT BEFORE -> AFTER` per change,
/// each followed by its diff (a dry run's; a secret's content shows as
/// `<secret NAME>` changed, never its text). The human report and
/// `policyvm run --interactive` show repairs alike.
pub fn repair_lines(verb: &str, head: &str, changes: &[super::operators::Change]) -> String {
    let mut out = String::new();
    push_repair_lines(&mut out, verb, head, changes);
    out
}

/// [`repair_lines`], written at the end of `out`: a first run prints a
/// line per file it writes, each from a few pieces, without `format!`.
fn push_repair_lines(
    out: &mut String,
    verb: &str,
    head: &str,
    changes: &[super::operators::Change],
) {
    for c in changes {
        out.push_str(verb);
        out.push(' ');
        out.push_str(head);
        out.push_str(": ");
        out.push_str(&printable(&c.what));
        out.push(' ');
        if !c.before.is_empty() {
            out.push_str(&printable(&c.before));
            out.push_str(" -> ");
        }
        out.push_str(&printable(&c.after));
        out.push('\n');
        if let Some(diff) = &c.diff {
            out.push_str(&printable_lines(diff));
        }
    }
}

/// A promise's head in the human report, `TYPE "PROMISER" (FILE:LINE)`
/// (`format!("{} {:?} ({})", ...)`), written into `out` after clearing it:
/// one buffer serves every line of a report.
fn write_head(out: &mut String, p: &super::PromiseResult) {
    use std::fmt::Write as _;
    out.clear();
    out.push_str(p.kind());
    out.push(' ');
    // `{:?}` leaves printable ASCII but `"` and `\\` as it is: such a
    // promiser (nearly all) is copied between quotes; any other is
    // formatted (escapes and all) as before.
    if p.promiser
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(&p.promiser);
        out.push('"');
    } else {
        // Writing into a String cannot fail.
        let _ = write!(out, "{:?}", p.promiser);
    }
    out.push_str(" (");
    p.source.push_to(out);
    out.push(')');
}

fn outcome_word(o: &Outcome) -> &'static str {
    match o {
        Outcome::Kept => "kept",
        Outcome::Repaired => "repaired",
        Outcome::Failed(_) => "failed",
        Outcome::Skipped(_) => "skipped",
        Outcome::Changed => "changed",
    }
}

/// The `format` of every run report, real, dry or refused
/// (docs/schemas/converge-run-1.schema.json).
pub const FORMAT: &str = "converge-run/1";

/// The report of a run that never started because the bundle was refused:
/// which bundle, and why (the same reason the error line gives).
pub fn refused_json(bundle: &str, reason: &str) -> Value {
    json!({
        "format": FORMAT,
        "converged": false,
        "refused": { "bundle": bundle, "reason": reason },
    })
}

/// The JSON report: [`json_head`] with its `promises`.
pub fn json(r: &RunReport) -> Value {
    let mut report = json_head(r);
    if let Some(map) = report.as_object_mut() {
        let promises: Vec<Value> = r.promises.iter().map(promise_json).collect();
        map.insert("promises".to_owned(), Value::Array(promises));
    }
    report
}

/// One promise of the JSON report.
fn promise_json(p: &super::PromiseResult) -> Value {
    serde_json::to_value(StreamedPromise(p)).unwrap_or(Value::Null)
}

/// The JSON report, pretty-printed into `out` as it is serialized: the
/// bytes of `serde_json::to_writer_pretty(out, &json(r))`, without a
/// `Value` per promise (about a kilobyte each: the tree of a large run
/// was several times the run's own memory; issue 22, item 3). The rest of
/// the report is small and built as a tree ([`json_head`]); the promises
/// are written one by one where the tree has them (its keys are sorted).
pub fn write_json(r: &RunReport, out: impl std::io::Write) -> serde_json::Result<()> {
    let head = json_head(r);
    serde_json::to_writer_pretty(out, &Streamed { head: &head, r })
}

/// The report's tree with the promises written in place of its `promises`.
struct Streamed<'r> {
    head: &'r Value,
    r: &'r RunReport,
}

impl serde::Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let Value::Object(head) = self.head else {
            return self.head.serialize(s);
        };
        let mut map = s.serialize_map(Some(head.len()))?;
        for (key, value) in head {
            if key == "promises" {
                map.serialize_entry(key, &StreamedPromises(&self.r.promises))?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

struct StreamedPromises<'r>(&'r [super::PromiseResult]);

impl serde::Serialize for StreamedPromises<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(StreamedPromise))
    }
}

/// One promise, its keys in the order a `serde_json::Map` sorts them.
struct StreamedPromise<'r>(&'r super::PromiseResult);

impl serde::Serialize for StreamedPromise<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let p = self.0;
        let error = match p.outcome() {
            Outcome::Failed(e) | Outcome::Skipped(e) => Some(e),
            _ => None,
        };
        let mut map = s.serialize_map(Some(7))?;
        map.serialize_entry("changes", &StreamedChanges(p.changes()))?;
        map.serialize_entry("error", &error)?;
        map.serialize_entry("outcome", outcome_word(p.outcome()))?;
        map.serialize_entry("output", &p.output())?;
        map.serialize_entry("promiser", &p.promiser)?;
        map.serialize_entry("source", &p.source)?;
        map.serialize_entry("type", p.kind())?;
        map.end()
    }
}

struct StreamedChanges<'r>(&'r [super::operators::Change]);

impl serde::Serialize for StreamedChanges<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(StreamedChange))
    }
}

/// One change, its keys sorted as in a `serde_json::Map`.
struct StreamedChange<'r>(&'r super::operators::Change);

impl serde::Serialize for StreamedChange<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let c = self.0;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("after", &c.after)?;
        map.serialize_entry("before", &c.before)?;
        map.serialize_entry("diff", &c.diff)?;
        map.serialize_entry("what", &c.what)?;
        map.end()
    }
}

/// The JSON report without its `promises` (`null` in their place).
fn json_head(r: &RunReport) -> Value {
    let count = |w: &str| {
        r.promises
            .iter()
            .filter(|p| outcome_word(p.outcome()) == w)
            .count()
    };
    let owed: Vec<Value> = r
        .owed
        .iter()
        .map(|d| json!({ "type": d.kind, "promiser": d.promiser, "notified_by": d.by }))
        .collect();
    let commands: Vec<Value> = r
        .planned
        .iter()
        .map(|c| json!({ "source": c.source, "role": c.role, "argv": c.argv, "chroot": c.chroot }))
        .collect();
    // Probe facts (LANGUAGE.md section 15): each value, or why it is
    // unknown on this host.
    let probes: serde_json::Map<String, Value> = r
        .probes
        .outcomes()
        .iter()
        .map(|o| {
            let (value, error) = match &o.result {
                Ok(v) => (v.to_json(), Value::Null),
                Err(e) => (Value::Null, Value::from(e.clone())),
            };
            (
                o.name.clone(),
                json!({ "value": value, "error": error, "duration_ms": o.duration_ms }),
            )
        })
        .collect();
    let mut report = json!({
        "format": FORMAT,
        "bundle": { "name": r.bundle_name, "serial": r.serial, "digest": r.digest },
        "host": {
            "hostname": r.facts.hostname,
            "os_family": r.facts.os_family,
            "os_release": r.facts.os_release,
            "arch": r.facts.arch,
            "classes": r.classes,
        },
        "dry_run": r.dry_run,
        "passes": r.passes,
        "converged": r.converged,
        "oscillating": r.oscillating,
        "duration_ms": r.duration_ms as u64,
        "summary": {
            "kept": count("kept"),
            "repaired": count("repaired"),
            "failed": count("failed"),
            "skipped": count("skipped"),
            "changed": count("changed"),
            "unmanaged": r.unmanaged.len(),
            "owed_notifications": r.owed.len(),
        },
        "probes": probes,
        "promises": Value::Null,
        "unmanaged": r.unmanaged,
        "owed_notifications": owed,
        "commands": commands,
        "watch": {
            "chain": r.watch.chain,
            "broken": r.watch.broken,
            "changed_entries": r.watch.changed_entries,
            "changes": r.watch.changes,
            "recorded": r.watch.recorded,
            "error": r.watch.error,
        },
    });
    // Only a run with `unmanaged` promises says anything of extra entries
    // (LANGUAGE.md section 17): each with its type, escaped name and fate.
    if !r.extra.is_empty()
        || r.promises
            .iter()
            .any(|p| p.kind() == crate::unmanaged::KIND)
    {
        if let Some(map) = report.as_object_mut() {
            map.insert(
                "extra".to_owned(),
                serde_json::to_value(&r.extra).unwrap_or(Value::Null),
            );
            if let Some(Value::Object(summary)) = map.get_mut("summary") {
                summary.insert("extra".to_owned(), Value::from(r.extra.len()));
            }
        }
    }
    // Only a run with `neighbours` promises says anything of neighbours.
    if !r.neighbours.is_empty() {
        if let Some(map) = report.as_object_mut() {
            map.insert(
                "neighbours".to_owned(),
                crate::neighbours::json(&r.neighbours),
            );
        }
    }
    report
}

/// Promise types converged through the host's tools (`crate::backend`).
const BACKEND_TYPES: &[&str] = &[
    "package",
    "service",
    "user",
    "group",
    "process",
    "mount",
    "kernel_module",
    "sysctl",
];

/// One line per change, failure or report message, then the summary line:
/// `142 kept, 3 repaired, 0 failed in 2 passes, 18 ms`.
pub fn human(r: &RunReport) -> String {
    let mut out = String::new();
    human_lines(
        r,
        &mut Lines {
            out: &mut out,
            problems: None,
        },
    );
    out
}

/// The human report split for a terminal, cron or a journal: the lines
/// that say something went wrong (`FAILED`, `UNKNOWN` facts, `NOT
/// CONVERGED`) for standard error, everything else for standard output. A
/// cron line that sends standard output to /dev/null (docs/operations.md)
/// still logs every failure.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HumanStreams {
    pub out: String,
    pub problems: String,
}

/// [`human`], split into [`HumanStreams`] (each keeps the report's order).
pub fn human_streams(r: &RunReport) -> HumanStreams {
    let mut streams = HumanStreams::default();
    let HumanStreams { out, problems } = &mut streams;
    human_lines(
        r,
        &mut Lines {
            out,
            problems: Some(problems),
        },
    );
    streams
}

/// The lines of the human report, in order, written into `out`.
fn human_lines(r: &RunReport, out: &mut Lines<'_>) {
    let verb = if r.dry_run {
        "would repair"
    } else {
        "repaired"
    };
    // A probe that failed makes its fact unknown: said once, before the
    // promises it skips.
    for o in r.probes.outcomes() {
        if let Err(e) = &o.result {
            out.problem(format!(
                "UNKNOWN  facts.{}: probe failed: {}\n",
                o.name,
                printable(e)
            ));
        }
    }
    let mut head = String::new();
    for p in &r.promises {
        // A kept promise prints nothing unless a watch or a report says
        // something: its head is not formatted (a converged run of 10,000
        // promises formatted 10,000 heads to print none).
        if *p.outcome() == Outcome::Kept && p.kind() != "watch" && p.kind() != "report" {
            continue;
        }
        write_head(&mut head, p);
        match p.outcome() {
            Outcome::Failed(e) => {
                out.problem(format!("FAILED   {head}: {}\n", printable(e)));
            }
            Outcome::Repaired => {
                push_repair_lines(out.out, verb, &head, p.changes());
                // The commands a backend ran (their output is in the JSON
                // report).
                if BACKEND_TYPES.contains(&p.kind()) {
                    for line in p.output().iter().flat_map(|o| o.lines()) {
                        if line.starts_with("$ ") {
                            out.push_str(&format!("         {}\n", printable(line)));
                        }
                    }
                }
            }
            Outcome::Skipped(reason) => {
                out.push_str(&format!("skipped  {head}: {}\n", printable(reason)));
            }
            Outcome::Changed => {
                for c in p.changes() {
                    let arrow = match (c.before.is_empty(), c.after.is_empty()) {
                        (true, _) => printable(&c.after).into_owned(),
                        (false, true) => printable(&c.before).into_owned(),
                        _ => format!("{} -> {}", printable(&c.before), printable(&c.after)),
                    };
                    out.push_str(&format!(
                        "CHANGED  {head}: {} {arrow}\n",
                        printable(&c.what)
                    ));
                }
            }
            Outcome::Kept => {}
        }
        // What a watch recorded or could not read.
        if p.kind() == "watch" {
            for line in p.output().iter().flat_map(|o| o.lines()) {
                out.push_str(&format!("watch    {head}: {}\n", printable(line)));
            }
        }
        if p.kind() == "report" {
            if let Some(message) = &p.output() {
                out.push_str(&format!("report   {}: {message}\n", p.promiser));
            }
        }
    }
    for path in &r.unmanaged {
        out.push_str(&format!("unmanaged {}\n", printable(path)));
    }
    // Extra entries (two-way verification): names are already escaped.
    for e in &r.extra {
        out.push_str(&format!(
            "extra    {} {}: {} ({})\n",
            e.kind,
            printable(&e.name),
            e.action.word().replace('_', " "),
            printable(&e.source)
        ));
    }
    if let Some(broken) = &r.watch.broken {
        out.push_str(&format!("BROKEN   watch history: {}\n", printable(broken)));
    }
    if let Some(e) = &r.watch.error {
        out.push_str(&format!("FAILED   watch history: {}\n", printable(e)));
    }
    if r.watch.chain.length > 0 {
        out.push_str(&format!(
            "watch history: {} records, head {}\n",
            r.watch.chain.length, r.watch.chain.head
        ));
    }
    // Every command a real run would run, with its argv (issue 17 item 8).
    for c in &r.planned {
        let argv: Vec<String> = c.argv.iter().map(|a| format!("{:?}", a)).collect();
        let place = match &c.chroot {
            Some(root) => format!("chrooted into {}", printable(root)),
            None => "on the host".to_owned(),
        };
        out.push_str(&format!(
            "would run ({}, {}, {place}): [{}]\n",
            c.role,
            c.source,
            printable(&argv.join(", "))
        ));
    }
    for d in &r.owed {
        out.push_str(&format!("OWED     {}\n", printable(&d.to_string())));
    }
    if !r.converged {
        out.problem(format!(
            "NOT CONVERGED after {} passes; still changing: {}\n",
            r.passes,
            r.oscillating.join(", ")
        ));
    }
    let count = |w: &str| {
        r.promises
            .iter()
            .filter(|p| outcome_word(p.outcome()) == w)
            .count()
    };
    let owed = if r.owed.is_empty() {
        String::new()
    } else {
        format!(", {} notification(s) owed", r.owed.len())
    };
    let changed = match count("changed") {
        0 => String::new(),
        n => format!(", {n} changed"),
    };
    let changed = match r.extra.len() {
        0 => changed,
        n => format!("{changed}, {n} extra"),
    };
    out.push_str(&format!(
        "{}{} kept, {} repaired, {} failed, {} skipped{changed}{owed} in {} pass{}, {} ms\n",
        if r.dry_run { "dry run: " } else { "" },
        count("kept"),
        count("repaired"),
        count("failed"),
        count("skipped"),
        r.passes,
        if r.passes == 1 { "" } else { "es" },
        r.duration_ms
    ));
}

/// Where [`human_lines`] writes: `push_str` for information, `problem`
/// for what goes to standard error, into `problems` if the report is
/// split ([`human_streams`]), else in order with the rest ([`human`]).
struct Lines<'a> {
    out: &'a mut String,
    problems: Option<&'a mut String>,
}

impl Lines<'_> {
    fn push_str(&mut self, line: &str) {
        self.out.push_str(line);
    }

    fn problem(&mut self, line: String) {
        match self.problems.as_deref_mut() {
            Some(problems) => problems.push_str(&line),
            None => self.out.push_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::source::Source;
    use crate::run::PromiseResult;

    fn result(promiser: &str, source: Source) -> PromiseResult {
        let mut result = PromiseResult::new(
            0,
            "file",
            promiser,
            Outcome::Repaired,
            source,
            Vec::new(),
            None,
        );
        result.set_repaired_passes(1);
        result
    }

    /// The head written in place is the `format!` it replaced, for every
    /// kind of promiser: plain, quoted, escaped, not ASCII.
    #[test]
    fn heads_are_written_as_formatted() {
        let mut head = String::from("left over");
        for promiser in [
            "/etc/motd",
            "/a b/c'd",
            "/q\"uote",
            "/back\\slash",
            "/new\nline\t\r",
            "/\u{1b}[2J",
            "/caf\u{e9}/\u{202e}x",
            "/del\u{7f}",
            "",
        ] {
            for source in [Source::default(), Source::for_test("p.policy", 12)] {
                let p = result(promiser, source);
                write_head(&mut head, &p);
                assert_eq!(
                    head,
                    format!("{} {:?} ({})", p.kind(), p.promiser, p.source)
                );
            }
        }
    }
}
