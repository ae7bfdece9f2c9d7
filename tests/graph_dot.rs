//! `policyc graph --format dot`: a legend for the edge styles, each edge
//! drawn once, promises from a loop told apart; and the book's picture of
//! `examples/site.policy` (docs/images/site-graph.svg) shows today's graph.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use converge::{binary, repo_root};

fn graph(dir: &Path, file: &str) -> String {
    let out = Command::new(binary("policyc"))
        .current_dir(dir)
        .args(["graph", file, "--format", "dot"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `NAME [label="..."]` lines: node name -> label (unescaped).
fn dot_nodes(dot: &str) -> BTreeMap<String, String> {
    dot.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" [label=\"")?;
            if name.contains(' ') {
                return None;
            }
            let label = rest.strip_suffix("\"];")?;
            Some((name.to_owned(), unescape_dot(label)))
        })
        .collect()
}

/// `A -> B [...]` lines, as `A->B` with their attributes.
fn dot_edges(dot: &str) -> Vec<String> {
    dot.lines()
        .filter_map(|line| {
            let (ends, attrs) = line.trim().split_once(" [")?;
            let (from, to) = ends.split_once(" -> ")?;
            Some(format!("{from}->{to} [{attrs}"))
        })
        .collect()
}

fn unescape_dot(label: &str) -> String {
    let mut out = String::new();
    let mut chars = label.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

const LOOP: &str = r#"let resolvers = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
bundle dns {
  for r in resolvers {
    line "/etc/resolv.conf" { present = "nameserver ${r}"; }
  }
  file "/etc/hosts" { content = "127.0.0.1 localhost\n"; }
  command "reload" { run = ["/bin/true"]; creates = "/run/x"; after = [file "/etc/hosts", file "/etc/hosts"]; }
}
policy { dns(); }
"#;

#[test]
fn promises_from_a_loop_have_distinct_labels() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dns.policy"), LOOP).unwrap();
    let dot = graph(dir.path(), "dns.policy");
    let labels: Vec<String> = dot_nodes(&dot)
        .into_iter()
        .filter(|(name, _)| name.starts_with('p'))
        .map(|(_, label)| label)
        .collect();
    let resolv: Vec<&String> = labels
        .iter()
        .filter(|l| l.contains("resolv.conf"))
        .collect();
    assert_eq!(resolv.len(), 3, "{dot}");
    for ip in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
        assert_eq!(
            resolv
                .iter()
                .filter(|l| l.ends_with(&format!("present = \"nameserver {ip}\"")))
                .count(),
            1,
            "{resolv:?}"
        );
    }
    let mut unique = labels.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), labels.len(), "{labels:?}");
}

#[test]
fn each_edge_is_drawn_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dns.policy"), LOOP).unwrap();
    for dot in [
        graph(dir.path(), "dns.policy"),
        graph(repo_root(), "examples/site.policy"),
    ] {
        let edges = dot_edges(&dot);
        let mut unique = edges.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), edges.len(), "{edges:#?}");
        assert!(!edges.is_empty());
    }
}

#[test]
fn a_legend_explains_every_edge_style() {
    let dot = graph(repo_root(), "examples/site.policy");
    assert!(dot.contains("subgraph cluster_legend"), "{dot}");
    let legend: Vec<String> = dot_edges(&dot)
        .into_iter()
        .filter(|e| e.starts_with("legend"))
        .collect();
    for style in [
        "label=\"after\"",
        "style=dashed",
        "style=bold, color=red",
        "label=\"contains\"",
        "label=\"account\"",
    ] {
        assert!(
            legend.iter().any(|e| e.contains(style)),
            "no legend for {style}: {legend:#?}"
        );
    }
    // Every style the graph uses is one the legend shows.
    for edge in dot_edges(&dot).iter().filter(|e| e.starts_with('p')) {
        let style = edge.split_once(" [").unwrap().1;
        let kind = style.split(", label=").next().unwrap();
        assert!(
            legend.iter().any(|e| e.contains(kind)),
            "{edge} has no legend entry"
        );
    }
}

/// The nodes (with their label lines) and edges an SVG drawn by `dot`
/// shows, read from its `<title>` and `<text>` elements.
fn svg_graph(svg: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut nodes = BTreeMap::new();
    let mut edges = Vec::new();
    for block in svg.split("<g id=\"").skip(1) {
        let title = block
            .split_once("<title>")
            .and_then(|(_, rest)| rest.split_once("</title>"))
            .map(|(t, _)| unescape_xml(t))
            .unwrap_or_default();
        if block.starts_with("node") {
            let lines: Vec<String> = block
                .split("<text")
                .skip(1)
                .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split_once("</text>")))
                .map(|(text, _)| unescape_xml(text))
                .collect();
            nodes.insert(title, lines.join("\n"));
        } else if block.starts_with("edge") {
            edges.push(title);
        }
    }
    (nodes, edges)
}

fn unescape_xml(text: &str) -> String {
    text.replace("&#45;", "-")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// docs/images/site-graph.svg is `policyc graph examples/site.policy`
/// through `dot -Tsvg`: it must show exactly today's nodes, labels and
/// edges (compared structurally, so another Graphviz version's layout does
/// not matter). Regenerate it with the command in docs/analysis.md.
#[test]
fn the_books_site_graph_is_current() {
    let dot = graph(repo_root(), "examples/site.policy");
    let svg = std::fs::read_to_string(repo_root().join("docs/images/site-graph.svg")).unwrap();
    let (svg_nodes, mut svg_edges) = svg_graph(&svg);
    assert_eq!(
        svg_nodes,
        dot_nodes(&dot),
        "docs/images/site-graph.svg is stale: regenerate it (docs/analysis.md)"
    );
    let mut edges: Vec<String> = dot_edges(&dot)
        .iter()
        .map(|e| e.split_once(" [").unwrap().0.to_owned())
        .collect();
    edges.sort();
    svg_edges.sort();
    assert_eq!(
        svg_edges, edges,
        "docs/images/site-graph.svg is stale: regenerate it (docs/analysis.md)"
    );
}
