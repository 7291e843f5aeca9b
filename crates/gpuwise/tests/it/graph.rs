//! The crate graph stays one-way (ARCHITECTURE.md): every workspace crate has its place, each
//! depends only on the crates below it, the pure crates reach no network, files or command
//! line, and no crate holds much more than 30 % of the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::common::repo;

/// Each workspace crate and the workspace crates it may depend on (normal and build
/// dependencies; tests may reach further).
const LAYERS: &[(&str, &[&str])] = &[
    ("gpuwise-catalog", &[]),
    ("gpuwise-core", &["gpuwise-catalog"]),
    ("gpuwise-plan", &["gpuwise-catalog"]),
    ("gpuwise-sim", &["gpuwise-plan"]),
    ("gpuwise-pack", &[]),
    (
        "gpuwise-advise",
        &[
            "gpuwise-core",
            "gpuwise-catalog",
            "gpuwise-plan",
            "gpuwise-sim",
        ],
    ),
    ("gpuwise-ledger", &["gpuwise-core", "gpuwise-catalog"]),
    ("gpuwise-sources", &["gpuwise-core", "gpuwise-catalog"]),
    ("gpuwise-prom", &["gpuwise-core", "gpuwise-sources"]),
    (
        "gpuwise-render",
        &[
            "gpuwise-core",
            "gpuwise-catalog",
            "gpuwise-plan",
            "gpuwise-advise",
            "gpuwise-ledger",
            "gpuwise-sim",
            "gpuwise-pack",
        ],
    ),
    ("gpuwise-synth", &["gpuwise-core"]),
    ("gpuwise-record", &[]),
    (
        "gpuwise-server",
        &[
            "gpuwise-core",
            "gpuwise-sources",
            "gpuwise-advise",
            "gpuwise-render",
        ],
    ),
    (
        "gpuwise",
        &[
            "gpuwise-core",
            "gpuwise-catalog",
            "gpuwise-plan",
            "gpuwise-advise",
            "gpuwise-sources",
            "gpuwise-prom",
            "gpuwise-render",
            "gpuwise-synth",
            "gpuwise-record",
            "gpuwise-ledger",
            "gpuwise-sim",
            "gpuwise-server",
            "gpuwise-pack",
        ],
    ),
];

/// The pure crates: no I/O, no clock, no command line.
const PURE: &[&str] = &[
    "gpuwise-catalog",
    "gpuwise-core",
    "gpuwise-plan",
    "gpuwise-advise",
    "gpuwise-render",
    "gpuwise-ledger",
    "gpuwise-sim",
    "gpuwise-pack",
];

/// Crates that do I/O or parse a command line, which a pure crate must not depend on.
const EDGE_ONLY: &[&str] = &[
    "clap",
    "ureq",
    "fs-err",
    "hyper",
    "nvml-wrapper",
    "indicatif",
    "signal-hook",
    "rayon",
    "tokio",
    "axum",
    "tower-http",
    "prometheus-client",
];

fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata JSON")
}

fn rust_lines(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("src dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            n += rust_lines(&p);
        } else if p.extension().is_some_and(|x| x == "rs") {
            n += std::fs::read_to_string(&p).expect("read").lines().count();
        }
    }
    n
}

#[test]
fn the_crate_graph_is_one_way() {
    let layers: BTreeMap<&str, BTreeSet<&str>> = LAYERS
        .iter()
        .map(|(c, deps)| (*c, deps.iter().copied().collect()))
        .collect();
    // The allowed edges themselves have no cycle: each crate's allowed dependencies come
    // earlier in LAYERS.
    for (i, (c, deps)) in LAYERS.iter().enumerate() {
        for d in *deps {
            let j = LAYERS.iter().position(|(x, _)| x == d);
            assert!(
                j.is_some_and(|j| j < i),
                "{c} may depend on {d}, which must come before it in LAYERS"
            );
        }
    }
    let meta = metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let mut sizes = BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().expect("name");
        let allowed = layers.get(name).unwrap_or_else(|| {
            panic!("crate {name} has no place in the graph: add it to LAYERS and ARCHITECTURE.md")
        });
        for d in p["dependencies"].as_array().expect("deps") {
            let dep = d["name"].as_str().expect("dep name");
            if d["kind"].as_str() == Some("dev") {
                continue;
            }
            if dep.starts_with("gpuwise") {
                assert!(
                    allowed.contains(dep),
                    "{name} depends on {dep}, against the one-way graph in ARCHITECTURE.md"
                );
            }
            if PURE.contains(&name) {
                assert!(
                    !EDGE_ONLY.contains(&dep),
                    "{name} is pure but depends on {dep} (I/O or command line)"
                );
            }
        }
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest"));
        let src = manifest.parent().expect("crate dir").join("src");
        sizes.insert(name.to_owned(), rust_lines(&src));
        assert_eq!(
            p["publish"],
            serde_json::json!([]),
            "{name}: publish = false"
        );
    }
    assert_eq!(
        sizes.len(),
        LAYERS.len(),
        "every crate in LAYERS exists: {sizes:?}"
    );
    let total: usize = sizes.values().sum();
    for (name, n) in &sizes {
        assert!(
            *n * 100 <= total * 33,
            "{name} holds {n} of {total} lines ({}%): split it (ARCHITECTURE.md)",
            n * 100 / total
        );
    }
}
