#![no_main]
//! Fuzz the packing readers and engine: node, workload and job lists from any bytes, then
//! every policy on what was read (at most 200 nodes and 200 workloads, so one run stays
//! fast), no panic. Before a NUL byte: the node list; after it: the workload list.

use gpuwise_pack::{cluster, jobs, mig, place};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (nodes_text, pods_text) = text.split_once('\0').unwrap_or((&text, &text));
    let _ = jobs::parse(pods_text, "fuzz-jobs.csv");
    let (Ok(nodes), Ok(pods)) = (
        cluster::parse_nodes(nodes_text, "fuzz-nodes.csv"),
        cluster::parse_pods(pods_text, "fuzz-pods.csv"),
    ) else {
        return;
    };
    let nodes = &nodes.items[..nodes.items.len().min(200)];
    let pods = &pods.items[..pods.items.len().min(200)];
    let catalog = mig::MigCatalog::from([(
        nodes.first().map(|n| n.model.clone()).unwrap_or_default(),
        vec![
            mig::MigProfile {
                name: "1g.10gb".into(),
                compute: 1,
                memory: 1,
                max_instances: 7,
            },
            mig::MigProfile {
                name: "3g.40gb".into(),
                compute: 3,
                memory: 4,
                max_instances: 2,
            },
            mig::MigProfile {
                name: "7g.80gb".into(),
                compute: 7,
                memory: 8,
                max_instances: 1,
            },
        ],
    )]);
    for policy in place::Policy::ALL {
        for load in [None, Some(1.3)] {
            let protocol = place::Protocol {
                load,
                seed: 7,
                shuffle: true,
                ..place::Protocol::default()
            };
            let _ = gpuwise_pack::run(nodes, pods, policy, &protocol, &catalog);
        }
    }
});
