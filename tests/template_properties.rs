//! Templates over random data (LANGUAGE.md §10-§12): a random map of
//! records in a JSON data file, rendered by one template with a `for k, v`
//! loop, a nested `for`, an `if` on a field, a lookup by `sys.hostname`
//! with `??` and a function of a fact, converges a sandbox root to exactly
//! what a model of the template computes, and a second run repairs
//! nothing. Values hold `$`, `{`, `%` and `#`: data is never template text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use ::converge::support::{compile_files, converge, failed, repaired, verified};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Site {
    port: i64,
    tls: bool,
    tags: Vec<String>,
}

const POLICY: &str = r#"
type Site = { port: int, tls: bool = false, tags: list<string> = [] };
let sites: map<string, Site> = data("data/sites.json");
bundle site() {
  file "/etc/site.conf" { template = "templates/site.tmpl"; }
}
policy { site(); }
"#;

const TEMPLATE: &str = "\
{# one block per site, in key order #}
{% for name, s in sites %}
site ${name} port=${s.port}{% if s.tls %} tls{% endif %}
{%   for t in s.tags %}
  tag [${t}]
{%   endfor %}
{% endfor %}
me=${sites[sys.hostname].port ?? 0} ${upper(sys.hostname)}
";

/// What the template must render, computed independently.
fn model(sites: &BTreeMap<String, Site>, host: &str) -> String {
    let mut out = String::new();
    for (name, s) in sites {
        out.push_str(&format!("site {name} port={}", s.port));
        if s.tls {
            out.push_str(" tls");
        }
        out.push('\n');
        for t in &s.tags {
            out.push_str(&format!("  tag [{t}]\n"));
        }
    }
    let me = sites.get(host).map_or(0, |s| s.port);
    out.push_str(&format!("me={me} {}\n", host.to_uppercase()));
    out
}

fn data_file(sites: &BTreeMap<String, Site>) -> String {
    let json: serde_json::Map<String, serde_json::Value> = sites
        .iter()
        .map(|(k, s)| {
            let mut record = serde_json::Map::new();
            record.insert("port".into(), s.port.into());
            // `tls` has a default: leave it out when false half the time.
            if s.tls || s.port % 2 == 0 {
                record.insert("tls".into(), s.tls.into());
            }
            if !s.tags.is_empty() {
                record.insert("tags".into(), s.tags.clone().into());
            }
            (k.clone(), serde_json::Value::Object(record))
        })
        .collect();
    serde_json::to_string_pretty(&json).unwrap()
}

fn site() -> impl Strategy<Value = Site> {
    (
        0i64..70000,
        any::<bool>(),
        prop::collection::vec("[a-zA-Z0-9 ._$%{}#-]{0,8}", 0..3),
    )
        .prop_map(|(port, tls, tags)| Site { port, tls, tags })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_data_renders_as_the_model_says_and_converges_once(
        sites in prop::collection::btree_map("[a-z]{1,5}", site(), 0..4),
        host_pick in any::<prop::sample::Index>(),
        stranger in any::<bool>(),
    ) {
        let host = if stranger || sites.is_empty() {
            "zz-stranger".to_owned()
        } else {
            sites.keys().nth(host_pick.index(sites.len())).unwrap().clone()
        };
        let data = data_file(&sites);
        let bundle = verified(&compile_files(&[
            ("site.policy", POLICY),
            ("data/sites.json", &data),
            ("templates/site.tmpl", TEMPLATE),
        ]));
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(root.path().join("etc/hostname"), format!("{host}\n")).unwrap();
        std::fs::write(root.path().join("etc/os-release"), "ID=debian\n").unwrap();

        let first = converge(&bundle, root.path(), false);
        prop_assert!(failed(&first).is_empty(), "{:?}", failed(&first));
        let written = std::fs::read_to_string(root.path().join("etc/site.conf")).unwrap();
        prop_assert_eq!(written, model(&sites, &host), "data:\n{}", data);

        let second = converge(&bundle, root.path(), false);
        prop_assert_eq!(repaired(&second), 0, "{:?}", second);
    }
}
