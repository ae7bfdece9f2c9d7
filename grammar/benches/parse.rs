//! Front-end throughput: lexing and parsing a generated 100,000-promise
//! policy (about 310,000 lines, 12 MB).
//!
//! Run with `cargo bench -p converge-grammar --bench parse`. No bench crate:
//! each measurement is a wall-clock time over one whole-file run, repeated
//! after a warm-up run, and the best and the median are reported, for the
//! lexer alone (iterating `Lexer` to the end), for `parse` (lexing and
//! parsing, the returned tree dropped outside the timing) and for `parse`
//! plus dropping the tree. The policy is the one
//! `bench/gen_policy.py` writes (byte-identical for the same promise count;
//! set `CONVERGE_BENCH_DUMP=FILE` to write it out and compare).
//!
//! Environment: `CONVERGE_BENCH_PROMISES` (default 100000),
//! `CONVERGE_BENCH_RUNS` (default 5), `CONVERGE_BENCH_DUMP`.
//! `CONVERGE_BENCH_MEMORY=1` instead parses once in this fresh process and
//! prints the resident memory before and after (Linux `/proc/self/status`):
//! the peak of a front-end-only `policyc check` (source text plus tree).

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use converge_grammar::lexer::Lexer;
use converge_grammar::{parse, FileId};

const PER_BUNDLE: usize = 10;

/// `VmRSS` and `VmHWM` of this process, in kB.
fn memory_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn measure_memory(promises: usize) {
    let src = generate(promises);
    let (before, _) = memory_kb();
    let (module, errors) = converge_grammar::parse(converge_grammar::FileId(0), &src);
    assert!(errors.is_empty(), "the generated policy has syntax errors");
    let (after, peak) = memory_kb();
    println!(
        "front end memory: {} lines, {} bytes",
        src.lines().count(),
        src.len()
    );
    println!(
        "  resident before parse: {:>8} kB (source text and generator)",
        before
    );
    println!(
        "  resident after parse:  {:>8} kB (tree held: {} kB)",
        after,
        after.saturating_sub(before)
    );
    println!("  peak resident:         {:>8} kB", peak);
    std::hint::black_box(&module);
}

fn main() {
    let promises = env_usize("CONVERGE_BENCH_PROMISES", 100_000);
    if std::env::var_os("CONVERGE_BENCH_MEMORY").is_some() {
        measure_memory(promises);
        return;
    }
    let runs = env_usize("CONVERGE_BENCH_RUNS", 5).max(1);
    let src = generate(promises);
    if let Some(path) = std::env::var_os("CONVERGE_BENCH_DUMP") {
        if let Err(err) = std::fs::write(&path, &src) {
            eprintln!("cannot write {}: {err}", path.to_string_lossy());
            std::process::exit(2);
        }
    }
    let lines = src.lines().count();
    let bytes = src.len();

    // The benchmark must measure the success path: no errors, every bundle there.
    let (module, errors) = parse(FileId(0), &src);
    assert!(
        errors.is_empty(),
        "generated policy has {} syntax errors, first: {:?}",
        errors.len(),
        errors.first()
    );
    let bundles = promises.div_ceil(PER_BUNDLE);
    // Header: 3 classes, 1 exclusive, 2 lets, 1 body; then the bundles and the policy.
    assert_eq!(module.items.len(), 7 + bundles + 1, "unexpected item count");
    drop(module);

    println!("front end: lex + parse of a generated policy");
    println!(
        "  input: {promises} promises, {lines} lines, {bytes} bytes ({:.2} MB)",
        mb(bytes)
    );

    let mut tokens = 0usize;
    let lex = measure(runs, || {
        let mut lexer = Lexer::new(black_box(&src));
        let n = lexer.by_ref().count();
        assert!(
            lexer.errors.is_empty(),
            "lexical errors in generated policy"
        );
        tokens = n;
        black_box(n);
    });
    report("lex only", &lex, lines, bytes);
    println!("    ({tokens} tokens)");

    // `parse` itself, then dropping the tree it returned, timed separately:
    // the drop is not lexing or parsing, but `policyc check` pays it unless
    // it leaks the tree at exit.
    let mut parse_only = Vec::with_capacity(runs);
    let mut drops = Vec::with_capacity(runs);
    let full = measure(runs, || {
        let start = Instant::now();
        let (module, errors) = parse(FileId(0), black_box(&src));
        let parsed = Instant::now();
        assert!(errors.is_empty());
        black_box(&module);
        let dropping = Instant::now();
        drop(module);
        parse_only.push(parsed - start);
        drops.push(dropping.elapsed());
    });
    // The warm-up run pushed too; keep the timed runs only.
    let parse_only = sorted_tail(parse_only, runs);
    let drops = sorted_tail(drops, runs);
    report("lex + parse", &parse_only, lines, bytes);
    report("+ tree drop", &full, lines, bytes);

    let (lex_med, parse_med, drop_med) = (median(&lex), median(&parse_only), median(&drops));
    let pct = |t: Duration| 100.0 * t.as_secs_f64() / median(&full).as_secs_f64();
    println!(
        "  split (medians, % of lex + parse + drop): lexing {:.1} ms ({:.0}%), \
         parsing and building the tree {:.1} ms ({:.0}%), dropping the tree {:.1} ms ({:.0}%)",
        ms(lex_med),
        pct(lex_med),
        ms(parse_med.saturating_sub(lex_med)),
        pct(parse_med.saturating_sub(lex_med)),
        ms(drop_med),
        pct(drop_med),
    );
    for (what, times) in [("lex + parse", &parse_only), ("lex + parse + drop", &full)] {
        let lps = lines as f64 / best(times).as_secs_f64();
        println!(
            "  target >= 1,000,000 lines/s, {what} (best run): {} ({lps:.0} lines/s)",
            if lps >= 1_000_000.0 { "met" } else { "MISSED" }
        );
    }
}

/// The last `runs` entries (the timed ones), sorted.
fn sorted_tail(mut times: Vec<Duration>, runs: usize) -> Vec<Duration> {
    let mut timed = times.split_off(times.len().saturating_sub(runs));
    timed.sort();
    timed
}

fn measure(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    f(); // warm-up: page in the source, grow the allocator's arenas
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times
}

fn best(times: &[Duration]) -> Duration {
    times.first().copied().unwrap_or_default()
}

fn median(times: &[Duration]) -> Duration {
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn report(what: &str, times: &[Duration], lines: usize, bytes: usize) {
    for (label, t) in [("best", best(times)), ("median", median(times))] {
        let secs = t.as_secs_f64();
        println!(
            "  {what:<12} {label:<6} {:>8.1} ms  {:>12.0} lines/s  {:>7.1} MB/s",
            ms(t),
            lines as f64 / secs,
            mb(bytes) / secs,
        );
    }
}

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1e3
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().unwrap_or_else(|_| {
            eprintln!("{name}={value:?} is not a number");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

// ---------------------------------------------------------------- generator
// Keep in step with bench/gen_policy.py: both write the same bytes.

fn generate(promises: usize) -> String {
    let (full, rest) = (promises / PER_BUNDLE, promises % PER_BUNDLE);
    let mut out = String::with_capacity(promises * 130);
    header(&mut out, promises, full + usize::from(rest > 0));
    for b in 0..full {
        bundle(&mut out, b);
    }
    if rest > 0 {
        out.push_str("\nbundle extra {\n");
        for i in 0..rest {
            let _ = writeln!(out, "  package \"extra-{i}\" {{ state = installed; }}");
        }
        out.push_str("}\n");
    }
    out.push_str("\npolicy {\n");
    for b in 0..full {
        if b % 3 == 0 {
            let _ = writeln!(out, "  when web {{ app_{b}(port = {}); }}", 9000 + b % 1000);
        } else {
            let _ = writeln!(out, "  app_{b}();");
        }
    }
    if rest > 0 {
        out.push_str("  extra();\n");
    }
    out.push_str("}\n");
    out
}

fn header(out: &mut String, promises: usize, bundles: usize) {
    let _ = writeln!(
        out,
        "// Generated policy: {promises} promises in {bundles} bundles."
    );
    out.push_str(
        r#"// Shape: bench/gen_policy.py and grammar/benches/parse.rs.

class web = sys.hostname =~ r"^web[0-9]+$";
class db = sys.hostname =~ r"^db[0-9]+$";
class maintenance = (monday || sunday) && hr03;
exclusive { web, db }

let ntp_servers: list<string> = ["0.pool.ntp.org", "1.pool.ntp.org", "2.pool.ntp.org"];
let banner = "Managed by converge on ${sys.hostname}\n";

/* Splice into files that hold secrets. */
body secure_file {
  mode = 0o600;
  owner = "root";
  group = "root";
}
"#,
    );
}

fn bundle(out: &mut String, b: usize) {
    let _ = write!(
        out,
        r#"
bundle app_{b}(port: int = {port}, docroot: string = "/srv/app{b}") {{
  package "app{b}-server" {{ state = installed; version = "2.{v1}.{v2}"; }}
  directory "${{docroot}}/data" {{ mode = 0o750; owner = "app{b}"; group = "app{b}"; }}
  file "/etc/app{b}/app.conf" {{
    content = "listen ${{port}}\nserver_name ${{sys.fqdn}}\nroot ${{docroot}}\n";
    mode = 0o640;
    notify = [service "app{b}"];
  }}
  service "app{b}" {{ state = running; enabled = true; after = [package "app{b}-server"]; }}
  user "app{b}" {{ ensure = present; uid = {uid}; shell = "/usr/sbin/nologin"; groups = ["app", "log"]; }}
  when debian && !maintenance {{
    line "/etc/default/app{b}" {{ present = "OPTS=\"--port ${{port}} --id {b}\""; }}
    command "migrate-app{b}" {{
      run = ["/usr/bin/app{b}", "migrate", "--to", "latest"];
      creates = "/var/lib/app{b}/migrated";
      timeout = 5m;
    }}
  }}
  for s in ntp_servers {{
    line "/etc/app{b}/ntp.conf" {{ present = "server ${{s}} iburst"; }}
  }}
  link "/etc/app{b}/current" {{ target = "/srv/app{b}/releases/{rel}"; after = [file "/etc/app{b}/app.conf"]; }}
  file "/etc/app{b}/motd" {{
    content = """
      app{b} on ${{sys.hostname}}, port ${{port}}. ${{banner}}
      """;
    use secure_file;
  }}
}}
"#,
        port = 8000 + b % 1000,
        v1 = b % 50,
        v2 = b % 7,
        uid = 20000 + b,
        rel = b % 10,
    );
}
