//! The catalog: specifications against the facts file, the importer on every price file, the
//! queries and their JSON contracts, overlays and bad catalog files.

use std::path::Path;

use gpuwise_catalog::{Catalog, parse_instances};

use crate::common::{f, run, shared};

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
    serde_json::from_str(&o.stdout).expect("JSON")
}

#[test]
fn every_spec_row_matches_the_facts_file() {
    let Some(s) = shared() else { return };
    let text = std::fs::read_to_string(s.join("gpu-specs.csv")).expect("gpu-specs.csv");
    let catalog = Catalog::builtin();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).expect("column");
    let mut checked = 0;
    for line in lines {
        // The source column is last and may contain commas.
        let f: Vec<&str> = line.splitn(header.len(), ',').collect();
        let name = f[col("name")];
        let spec = catalog
            .resolve(name)
            .unwrap_or_else(|| panic!("{name} from gpu-specs.csv is in the catalog"));
        assert_eq!(spec.name, name);
        let num = |c: &str| -> Option<f64> { f[col(c)].parse().ok() };
        assert_eq!(Some(spec.memory_gb), num("memory_gb"), "{name} memory");
        assert_eq!(
            spec.memory_bandwidth_gb_s,
            num("memory_bandwidth_gb_s"),
            "{name} bandwidth"
        );
        assert_eq!(
            spec.memory_type.as_deref(),
            Some(f[col("memory_type")]),
            "{name} memory type"
        );
        let t = &spec.dense_tflops;
        for (field, got) in [
            ("fp32", t.fp32),
            ("tf32", t.tf32),
            ("fp16", t.fp16),
            ("bf16", t.bf16),
            ("fp8", t.fp8),
            ("int8", t.int8),
        ] {
            // A figure the file leaves empty may be filled only as a stated bound (A10G: the
            // A10's tensor figures, with a note every plan repeats).
            if num(field).is_none() && got.is_some() {
                assert!(spec.compute_note.is_some(), "{name} {field} without a note");
                continue;
            }
            assert_eq!(got, num(field), "{name} {field}");
        }
        // A board power the file leaves empty may come from the GPU's own nvidia-smi capture,
        // or from the datasheet its source names, which then states it ("TDP 400 W").
        match (num("tdp_w"), spec.tdp_w) {
            (None, Some(w)) => assert!(
                spec.source.contains("nvidia-smi -q -x")
                    || spec.source.contains(&format!("TDP {w} W")),
                "{name}: a TDP of {w} W the shared file lacks, without its source"
            ),
            (file, ours) => assert_eq!(ours, file, "{name} TDP"),
        }
        // Every data-center GPU with compute figures has a board power (the energy estimates
        // need it): A100-SXM4-40GB, the V100-SXM2s and the H100 NVL lacked one. (Google
        // publishes no TPU board power.)
        if spec.vendor == "NVIDIA" && t.bf16.or(t.fp16).is_some() && spec.compute_note.is_none() {
            assert!(spec.tdp_w.is_some(), "{name} has no TDP");
        }
        assert_eq!(spec.vendor, f[col("vendor")]);
        assert!(
            spec.source
                .starts_with(f[col("source")].split(';').next().unwrap_or("")),
            "{name} carries its source"
        );
        checked += 1;
    }
    assert!(checked >= 19);
    for required in [
        "T4",
        "L4",
        "A10",
        "A10G",
        "L40S",
        "V100-SXM2-16GB",
        "V100-SXM2-32GB",
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A100-PCIE-40GB",
        "A100-PCIE-80GB",
        "H100-SXM5-80GB",
        "H100-PCIE-80GB",
        "H100-NVL-94GB",
        "H200-SXM-141GB",
        "B200",
        "MI300X",
    ] {
        assert!(
            catalog.resolve(required).is_some(),
            "{required} is in the catalog"
        );
    }
}

fn import(dir: &Path, extra: &[&str]) -> (Vec<gpuwise_catalog::Instance>, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("instances.csv");
    let mut args = vec!["catalog", "import", "--as-of", "2026-05-20"];
    let d = dir.display().to_string();
    if !d.is_empty() {
        args.extend_from_slice(&["--skypilot", &d]);
    }
    args.extend_from_slice(extra);
    let o_s = out.display().to_string();
    args.extend_from_slice(&["--out", &o_s]);
    let o = run(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let text = std::fs::read_to_string(&out).expect("written");
    (
        parse_instances(&text, "instances.csv")
            .expect("the importer writes what the catalog reads"),
        o.stderr,
    )
}

/// Every cloud has rows and prices of each kind it publishes; no sentinel or implausible
/// price leaks through.
fn every_cloud_and_plausible(rows: &[gpuwise_catalog::Instance]) {
    for cloud in ["aws", "gcp", "azure", "lambda", "vast"] {
        let n = rows.iter().filter(|r| r.cloud == cloud).count();
        assert!(n >= 20, "{cloud}: {n} rows");
        assert!(
            rows.iter()
                .any(|r| r.cloud == cloud && r.on_demand_usd_per_hour.is_some()),
            "{cloud} on-demand"
        );
    }
    for cloud in ["gcp", "azure"] {
        assert!(
            rows.iter()
                .any(|r| r.cloud == cloud && r.spot_usd_per_hour.is_some()),
            "{cloud} spot"
        );
    }
    assert!(
        rows.iter()
            .any(|r| r.cloud == "aws" && r.commit_1y_usd_per_hour.is_some()),
        "aws 1-year"
    );
    // No sentinel leaks: no price of 0 or 700, every price plausible.
    for r in rows {
        for p in [
            r.on_demand_usd_per_hour,
            r.spot_usd_per_hour,
            r.commit_1y_usd_per_hour,
        ]
        .into_iter()
        .flatten()
        {
            assert!(
                p > 0.0 && (p - 700.0).abs() > 1e-9,
                "{} {} {}: {p}",
                r.cloud,
                r.instance_type,
                r.region
            );
            assert!(
                p / r.gpu_count < 100.0,
                "{} {}: ${p}/h for {} GPUs",
                r.cloud,
                r.instance_type,
                r.gpu_count
            );
        }
    }
}

/// Rows whose values the price data's README states: GCP host + accelerator joins, Azure and
/// AWS list prices, GPU identification, Lambda.
fn known_rows(rows: &[gpuwise_catalog::Instance]) {
    // GCP: a VM is its host row plus its accelerator row (us-central1-a: 0.73948 + 2.93391).
    let a2 = rows
        .iter()
        .find(|r| {
            r.cloud == "gcp" && r.instance_type == "a2-highgpu-1g" && r.region == "us-central1"
        })
        .expect("a2-highgpu-1g");
    assert!((a2.on_demand_usd_per_hour.unwrap_or(0.0) - 3.67339).abs() < 1e-9);
    assert_eq!((a2.gpu.as_str(), a2.gpu_count), ("A100-SXM4-40GB", 1.0));
    // Known values: Azure eastus spot checks and AWS p4d (README of the price data).
    let nc = rows
        .iter()
        .find(|r| r.instance_type == "Standard_NC24ads_A100_v4" && r.region == "eastus")
        .expect("NC24ads");
    assert_eq!(
        (nc.on_demand_usd_per_hour, nc.spot_usd_per_hour),
        (Some(3.673), Some(0.746_721))
    );
    assert_eq!(nc.gpu, "A100-PCIE-80GB");
    let h = rows
        .iter()
        .find(|r| r.instance_type == "Standard_NC40ads_H100_v5" && r.region == "eastus")
        .expect("NC40ads");
    assert_eq!(h.gpu, "H100-NVL-94GB", "Azure NC H100 v5 is the NVL card");
    let p4d = rows
        .iter()
        .find(|r| r.instance_type == "p4d.24xlarge" && r.region == "us-east-1")
        .expect("p4d");
    assert_eq!(
        (p4d.gpu.as_str(), p4d.gpu_count, p4d.on_demand_usd_per_hour),
        ("A100-SXM4-40GB", 8.0, Some(21.957_642))
    );
    assert_eq!(p4d.as_of, "2026-01-21");
    assert!(
        rows.iter()
            .filter(|r| r.instance_type.starts_with("p3"))
            .all(|r| r.gpu.starts_with("V100")),
        "p3 is V100, not A100"
    );
    let g5 = rows
        .iter()
        .find(|r| r.instance_type == "g5.12xlarge" && r.region == "us-east-1")
        .expect("g5.12xlarge");
    assert_eq!(
        (g5.gpu.as_str(), g5.gpu_count),
        ("A10G", 4.0),
        "per-GPU memory 24 GB, not 24/4"
    );
    let lam = rows
        .iter()
        .find(|r| r.instance_type == "gpu_8x_h100_sxm5" && r.region == "us-east-1")
        .expect("lambda");
    assert_eq!(lam.on_demand_usd_per_hour, Some(31.92));
}

#[test]
fn importer_on_every_price_file() {
    let Some(s) = shared() else { return };
    let sky = s.join("prices/skypilot-format/anycloud-mirror");
    let aws = s.join("prices/aws-vantage/aws_gpu_instances_ondemand_reserved.csv");
    let aws_s = aws.display().to_string();
    // The command of docs/catalog.md, sources included.
    let (rows, log) = import(
        &sky,
        &[
            "--skypilot-source",
            "SkyPilot catalog (anycloud-sh/catalog@62ff0a98)",
            "--aws-vantage",
            &aws_s,
            "--aws-source",
            "instances.vantage.sh (tsaol/aws-gpu@77fcd9fe)",
            "--aws-as-of",
            "2026-01-21",
        ],
    );
    every_cloud_and_plausible(&rows);
    known_rows(&rows);
    // Duplicates and zones collapse: one row per (cloud, instance, region).
    let mut keys: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r.cloud.as_str(),
                r.instance_type.as_str(),
                r.region.as_str(),
            )
        })
        .collect();
    let n = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), n);
    assert!(
        log.contains("not a GPU instance") && log.contains("is not in the catalog"),
        "the import summary counts skips: {log}"
    );
    // GCP's A100 80GB accelerator row has a spot price above its on-demand price: the
    // joined a2-ultragpu prices ($2.95 on demand, below the 40 GB a2-highgpu's $3.67) are
    // flagged, listed and never quoted.
    let ultra = rows
        .iter()
        .find(|r| {
            r.cloud == "gcp" && r.instance_type == "a2-ultragpu-1g" && r.region == "us-central1"
        })
        .expect("a2-ultragpu-1g");
    use gpuwise_catalog::Pricing;
    assert_eq!(
        ultra.suspect_reason(Pricing::OnDemand),
        Some("source_spot_not_below_on_demand")
    );
    assert_eq!(ultra.price(Pricing::OnDemand), None);
    assert!(ultra.listed_price(Pricing::OnDemand).is_some());
    assert!(
        rows.iter()
            .filter(|r| r.spot_usd_per_hour.is_some() && r.on_demand_usd_per_hour.is_some())
            .all(|r| r.price(Pricing::Spot).is_none()
                || r.spot_usd_per_hour < r.on_demand_usd_per_hour),
        "no quotable spot price at or above on-demand"
    );
    assert!(
        log.contains("prices flagged suspect: spot_not_below_on_demand"),
        "{log}"
    );
    // The built-in file is exactly what this command produces from the shared data.
    assert_eq!(
        rows,
        Catalog::builtin().instances,
        "crates/gpuwise-catalog/data/instances.csv is up to date (docs/catalog.md)"
    );
}

#[test]
fn derived_subsets_import_like_the_full_files() {
    let Some(s) = shared() else { return };
    let sky = s.join("prices/skypilot-format/anycloud-mirror");
    let (full, _) = import(&sky, &[]);
    for (cloud, subset) in [
        ("azure", "vms_gpu_only.csv"),
        ("gcp", "vms_gpu_tpu_only.csv"),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join(cloud)).expect("mkdir");
        std::fs::copy(
            sky.join(cloud).join(subset),
            tmp.path().join(cloud).join("vms.csv"),
        )
        .expect("copy");
        let (rows, _) = import(tmp.path(), &[]);
        let want: Vec<_> = full.iter().filter(|r| r.cloud == cloud).collect();
        assert_eq!(rows.len(), want.len(), "{cloud} {subset}");
        assert!(
            rows.iter().zip(want).all(|(a, b)| a == b),
            "{cloud} {subset} rows equal"
        );
    }
}

#[test]
fn every_listed_offer_is_imported() {
    let Some(s) = shared() else { return };
    // SkyPilot's list of which clouds offer which accelerator, against what the import found.
    let text = std::fs::read_to_string(
        s.join("prices/skypilot-format/official-v8/common_accelerators.csv"),
    )
    .expect("list");
    let catalog = Catalog::builtin();
    let family = |g: &str| g.split('-').next().unwrap_or(g).to_owned();
    let mut checked = 0;
    for line in text.lines().skip(1) {
        let (acc, clouds) = line.split_once(',').expect("two columns");
        let Some(gpu) = gpuwise_catalog_import::map_gpu("", "", acc, None) else {
            continue;
        };
        for cloud in ["aws", "gcp", "azure", "lambda", "vast"] {
            if !clouds.to_ascii_lowercase().contains(&format!("'{cloud}'")) {
                continue;
            }
            let found = catalog
                .instances
                .iter()
                .any(|i| i.cloud == cloud && family(&i.gpu) == family(gpu));
            assert!(
                found,
                "{acc} on {cloud} is listed by SkyPilot but not in the catalog"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

#[test]
fn json_contracts() {
    let gpus = json(&["catalog", "gpus", "--format", "json"]);
    let a100 = gpus
        .as_array()
        .expect("array")
        .iter()
        .find(|g| g["name"] == "A100-SXM4-80GB")
        .expect("A100");
    for key in [
        "name",
        "aliases",
        "vendor",
        "architecture",
        "memory_gb",
        "memory_bandwidth_gb_s",
        "dense_tflops",
        "tdp_w",
        "mig_profiles",
        "source",
    ] {
        assert!(a100.get(key).is_some(), "catalog gpus: {key}");
    }
    for key in ["fp32", "tf32", "fp16", "bf16", "fp8", "int8"] {
        assert!(
            a100["dense_tflops"].get(key).is_some(),
            "dense_tflops.{key}"
        );
    }
    assert!(a100["dense_tflops"]["fp8"].is_null(), "Ampere has no FP8");
    let mig = &a100["mig_profiles"][0];
    for key in ["name", "compute_slices", "memory_gb", "max_instances"] {
        assert!(mig.get(key).is_some(), "mig_profiles.{key}");
    }
    let inst = json(&[
        "catalog",
        "instances",
        "--gpu",
        "T4",
        "--cloud",
        "aws",
        "--region",
        "us-east-1",
        "--format",
        "json",
    ]);
    let first = &inst[0];
    for key in [
        "cloud",
        "instance_type",
        "region",
        "gpu",
        "gpu_count",
        "vcpus",
        "memory_gib",
        "on_demand_usd_per_hour",
        "spot_usd_per_hour",
        "commit_1y_usd_per_hour",
        "commit_3y_usd_per_hour",
        "as_of",
        "source",
    ] {
        assert!(first.get(key).is_some(), "catalog instances: {key}");
    }
    assert_eq!(
        first["instance_type"], "g4dn.xlarge",
        "cheapest per GPU-hour first"
    );
    let price = json(&[
        "catalog",
        "price",
        "H100-SXM5-80GB",
        "--pricing",
        "on-demand",
        "--format",
        "json",
    ]);
    let rows = price.as_array().expect("rows");
    assert!(rows.len() >= 4);
    assert!(
        rows.windows(2)
            .all(|w| f(&w[0]["usd_per_gpu_hour"]) <= f(&w[1]["usd_per_gpu_hour"]))
    );
    let aws = rows.iter().find(|r| r["cloud"] == "aws").expect("aws");
    assert!((f(&aws["usd_per_gpu_hour"]) - 6.88).abs() < 1e-9);
    assert!((f(&aws["usd_per_dense_bf16_pflop_hour"]) - 6.88 / 0.9894).abs() < 1e-9);
    assert!((f(&aws["usd_per_tb_s_hour"]) - 6.88 / 3.35).abs() < 1e-9);
}

#[test]
fn csv_and_table_queries() {
    let o = run(&[
        "catalog",
        "instances",
        "--gpu",
        "H100",
        "--cloud",
        "gcp",
        "--pricing",
        "spot",
        "--format",
        "csv",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("cloud,instance,region,gpu,gpus,on_demand_usd_per_h,spot_usd_per_h,"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains('–'), "missing values are empty cells");
    assert!(
        o.stdout
            .lines()
            .skip(1)
            .all(|l| l.starts_with("gcp,") && l.contains(",H100-"))
    );
    let o = run(&["catalog", "gpus"]);
    assert!(o.stdout.contains("A100-SXM4-80GB") && o.stdout.contains("Dense TFLOPS"));
    // A wrapping column breaks between words, never inside one.
    assert!(
        o.stdout.contains("Lovelace") && o.stdout.contains("PROFILES"),
        "{}",
        o.stdout
    );
    // Figures that are a bound say so, in the table and in the price query.
    assert!(
        o.stdout.contains("A10G: tensor TFLOPS are the A10's"),
        "{}",
        o.stdout
    );
    let o = run(&["catalog", "price", "A10G"]);
    assert!(o.stdout.contains("an upper bound"), "{}", o.stdout);
    let o = run(&["catalog", "price", "A10"]);
    assert!(!o.stdout.contains("upper bound"), "{}", o.stdout);
    let o = run(&["catalog", "price", "H100"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("matches H100-SXM5-80GB, H100-PCIE-80GB, H100-NVL-94GB"),
        "{}",
        o.stderr
    );
}

#[test]
fn overlay_and_cloud_context_reach_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = dir.path().join("overlay.toml");
    std::fs::write(
        &overlay,
        "[[cluster]]\nname = \"dc1\"\ngpu = \"T4\"\ngpus = 100\npurchase_usd = 350400\namortization_years = 4\nusd_per_kwh = 0.2\npue = 1.5\nas_of = \"2026-05-01\"\n",
    )
    .expect("write");
    let r = crate::common::report_json(&[
        &crate::common::data("smi/two-gpus.csv"),
        "--overlay",
        &overlay.display().to_string(),
    ]);
    let t4 = &r["devices"][0];
    // 350,400 / (4 × 8760 × 100) = 0.1; 70 W × 1.5 × 0.2 $/kWh = 0.021.
    assert!(
        (f(&t4["usd_per_gpu_hour"]) - 0.121).abs() < 1e-9,
        "{}",
        t4["usd_per_gpu_hour"]
    );
    assert!(
        t4["price_source"]
            .as_str()
            .is_some_and(|s| s.contains("TCO"))
    );
    let r = crate::common::report_json(&[
        &crate::common::data("smi/two-gpus.csv"),
        "--cloud",
        "gcp",
        "--pricing",
        "spot",
    ]);
    let t4 = &r["devices"][0];
    assert!(
        t4["price_source"]
            .as_str()
            .is_some_and(|s| s.starts_with("catalog: gcp gpu-only-1xT4") && s.contains("spot")),
        "{}",
        t4["price_source"]
    );
    let o = run(&[
        "report",
        &crate::common::data("smi/two-gpus.csv"),
        "--cloud",
        "ibm",
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("--cloud: `ibm` is not a cloud in the catalog"),
        "{}",
        o.stderr
    );
}

#[test]
fn bad_catalog_files_give_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("instances.csv");
    std::fs::write(
        &bad,
        format!(
            "{}\naws,x,r,T4,1,,,abc,,,,2026-01-01,s,\n",
            gpuwise_catalog::INSTANCES_HEADER
        ),
    )
    .expect("write");
    let o = run(&[
        "catalog",
        "instances",
        "--instances",
        &bad.display().to_string(),
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("instances.csv` line 2: `on_demand_usd_per_hour` is not a number: `abc`"),
        "{}",
        o.stderr
    );
    let overlay = dir.path().join("overlay.toml");
    std::fs::write(&overlay, "[[cluster]]\nname = \"x\"\ngpu = \"Voodoo\"\ngpus = 1\npurchase_usd = 1\namortization_years = 1\nusd_per_kwh = 0.1\npue = 1.2\nas_of = \"2026-01-01\"\n").expect("write");
    let o = run(&[
        "catalog",
        "gpus",
        "--overlay",
        &overlay.display().to_string(),
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("cluster `x`: unknown GPU `Voodoo`"),
        "{}",
        o.stderr
    );
    let o = run(&[
        "catalog",
        "import",
        "--skypilot",
        &dir.path().display().to_string(),
        "--as-of",
        "2026-01-01",
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("no `<cloud>/vms.csv` below it"),
        "{}",
        o.stderr
    );
    let o = run(&[
        "catalog",
        "import",
        "--as-of",
        "yesterday",
        "--aws-vantage",
        "x.csv",
    ]);
    assert!(
        o.code == 2 && o.stderr.contains("`yesterday` is not a date"),
        "{}",
        o.stderr
    );
    std::fs::create_dir(dir.path().join("aws")).expect("mkdir");
    std::fs::write(
        dir.path().join("aws/vms.csv"),
        "InstanceType,Price\np4d,1\n",
    )
    .expect("write");
    let o = run(&[
        "catalog",
        "import",
        "--skypilot",
        &dir.path().display().to_string(),
        "--as-of",
        "2026-01-01",
    ]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("no `AcceleratorName` column"),
        "{}",
        o.stderr
    );
}

#[test]
fn suspect_prices_are_quoted_only_once_confirmed() {
    // GCP us-central1 a2-ultragpu-1g: $2.95 on demand from a broken accelerator row.
    let central = |v: &serde_json::Value| {
        v.as_array().expect("rows").iter().any(|r| {
            r["cloud"] == "gcp" && r["region"] == "us-central1" && r["pricing"] == "on-demand"
        })
    };
    let plain = json(&["catalog", "price", "A100-SXM4-80GB", "--format", "json"]);
    assert!(!central(&plain), "{plain}");
    let dir = tempfile::tempdir().expect("tempdir");
    let overlay = dir.path().join("overlay.toml");
    std::fs::write(
        &overlay,
        "[[confirm]]\ncloud = \"gcp\"\ninstance_type = \"a2-ultragpu-1g\"\nregion = \"us-central1\"\nnote = \"checked\"\n",
    )
    .expect("write");
    let o = overlay.display().to_string();
    let confirmed = json(&[
        "catalog",
        "price",
        "A100-SXM4-80GB",
        "--overlay",
        &o,
        "--format",
        "json",
    ]);
    assert!(central(&confirmed), "{confirmed}");
    // A confirmation of a row that does not exist is an error.
    std::fs::write(
        &overlay,
        "[[confirm]]\ncloud = \"gcp\"\ninstance_type = \"a9-imaginary\"\n",
    )
    .expect("write");
    let out = run(&["catalog", "price", "A100-SXM4-80GB", "--overlay", &o]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("a9-imaginary` is not in the catalog"),
        "{}",
        out.stderr
    );
}

#[test]
fn gpu_names_as_people_type_them() {
    // Aliases, case, separators and word order do not matter; a miss suggests names.
    for (typed, want) in [
        ("h100-sxm", "H100-SXM5-80GB"),
        ("A10G", "A10G"),
        ("a10g", "A10G"),
        ("a100-sxm4-80gb", "A100-SXM4-80GB"),
        ("80gb sxm a100", "A100-SXM4-80GB"),
    ] {
        let v = json(&["catalog", "price", typed, "--format", "json"]);
        let rows = v.as_array().expect("rows");
        assert!(!rows.is_empty(), "{typed}");
        assert!(rows.iter().all(|r| r["gpu"] == want), "{typed}: {v}");
    }
    let o = run(&["catalog", "price", "a100-80gb"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("matches A100-SXM4-80GB, A100-PCIE-80GB"),
        "{}",
        o.stderr
    );
    let o = run(&["catalog", "price", "Voodoo2"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("is not a GPU in the catalog; did you mean"),
        "{}",
        o.stderr
    );
}
