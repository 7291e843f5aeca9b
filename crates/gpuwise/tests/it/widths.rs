//! Every command's terminal output at 80 and 60 columns: no line wider than the terminal (a
//! single token wider than it, such as a long path, stands alone), and no token broken — every
//! word printed narrow is a word printed on a 1,000-column terminal, bar the words of the line
//! that names the columns left out.

use std::collections::BTreeSet;

use crate::common::{cmd, data, shared};

fn stdout(args: &[String], columns: &str) -> String {
    let o = cmd()
        .args(args)
        .env("COLUMNS", columns)
        .output()
        .expect("the gpuwise binary runs");
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn words(text: &str) -> BTreeSet<&str> {
    text.split_whitespace().collect()
}

fn fits(args: &[String]) {
    let wide = stdout(args, "1000");
    let known = words(&wide);
    let note =
        "left out to fit 80 60 columns: a wider terminal (COLUMNS) or --format json|csv shows them";
    for columns in [80, 60] {
        let out = stdout(args, &columns.to_string());
        assert!(!out.trim().is_empty(), "{args:?} printed nothing");
        for line in out.lines() {
            let width = line.chars().count();
            assert!(
                width <= columns || !line.trim().contains(char::is_whitespace),
                "{args:?} at {columns} columns: a line of {width}:\n{line}\n\n{out}"
            );
        }
        for w in words(&out) {
            // A column named in the note carries a comma after its header.
            let listed = w.trim_end_matches([',', ';']);
            assert!(
                known.contains(w) || known.contains(listed) || note.split(' ').any(|n| n == w),
                "{args:?} at {columns} columns: `{w}` is not a word of the wide output (a token broken?)\n{out}"
            );
        }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_command_fits_80_and_60_columns_without_breaking_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = |name: &str| dir.path().join(name).display().to_string();
    let o = cmd()
        .args([
            "generate",
            "--out",
            &d("fleet"),
            "--gpus",
            "24",
            "--days",
            "3",
        ])
        .args([
            "--interval",
            "5m",
            "--format",
            "dcgm",
            "--bill",
            &d("bill.csv"),
        ])
        .output()
        .expect("generate");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        d("teams.toml"),
        "[namespaces]\n\"research\" = \"research\"\n",
    )
    .expect("teams");
    std::fs::write(
        d("policy.toml"),
        "[budget]\nmonthly_usd = { research = 100 }\n[stale]\nmax_age_hours = 24\n",
    )
    .expect("policy");
    let fleet = d("fleet");
    let teams = d("teams.toml");
    let quiet = "--no-progress";
    let mut commands: Vec<Vec<String>> = vec![
        strings(&["report", &fleet, quiet]),
        strings(&["report", &fleet, quiet, "--advise"]),
        strings(&["advise", &fleet, quiet, "--cloud", "aws"]),
        strings(&[
            "allocate",
            &fleet,
            quiet,
            "--teams",
            &teams,
            "--mode",
            "chargeback",
        ]),
        strings(&["reconcile", "--bill", &d("bill.csv"), &fleet, quiet]),
        strings(&[
            "check",
            &fleet,
            quiet,
            "--teams",
            &teams,
            "--policy",
            &d("policy.toml"),
        ]),
        strings(&[
            "simulate",
            "commit",
            &fleet,
            quiet,
            "--gpu",
            "A100-SXM4-80GB",
        ]),
        strings(&[
            "plan",
            "--model",
            "llama-3.1-70b",
            "--mode",
            "train",
            "--checkpointing",
            "full",
        ]),
        strings(&[
            "plan",
            "--model",
            "llama-3-70b",
            "--precision",
            "int4",
            "--context",
            "8192",
        ]),
        strings(&["catalog", "gpus"]),
        strings(&["catalog", "instances"]),
        strings(&["catalog", "price", "A100-SXM4-80GB"]),
        strings(&["report", &data("smi/two-gpus.csv"), quiet]),
    ];
    if let Some(s) = shared() {
        commands.extend(shared_commands(&s));
    }
    for c in &commands {
        fits(c);
    }
}

/// Commands on the shared traces: flags split at spaces, paths kept whole.
fn shared_commands(s: &std::path::Path) -> Vec<Vec<String>> {
    let p = |rel: &str| s.join(rel).display().to_string();
    let with = |head: &str, path: String, tail: &str| {
        let mut v = strings(&head.split_whitespace().collect::<Vec<_>>());
        v.push(path);
        v.extend(tail.split_whitespace().map(str::to_owned));
        v
    };
    let mut pack = with(
        "pack",
        p("packing/alibaba-gpu-v2023/openb_pod_list_gpushare40.csv"),
        "--policy fgd --nodes",
    );
    pack.push(p("packing/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"));
    vec![
        with(
            "simulate spot --trace",
            p(
                "spot/skypilot-spot-traces/availability/1-node/aws-10-26-2022/us-west-2a_v100_1.json",
            ),
            "--work-hours 48 --deadline-hours 60 --changeover 12m --starts 5 \
             --spot-price 0.92 --on-demand-price 3.06",
        ),
        with(
            "schedule",
            p("jobs/microsoft-itp-2021/with_deadlines/cluster08.csv"),
            "--pool reserved=64@1.8 --pool cloud=unlimited@4.1 --policy cost-aware",
        ),
        pack,
    ]
}
