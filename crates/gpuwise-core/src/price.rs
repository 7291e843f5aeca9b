//! # Prices: what one GPU-hour of a device costs, and where that number came from
//!
//! Resolution order for a device (first hit wins):
//! 1. the first rule of the user's price file (`--prices FILE`) whose matchers all match the
//!    device (`host` glob, `model`, `label = "key=value"`); a rule gives its price directly
//!    (`usd_per_gpu_hour`, or `usd_per_instance_hour` with `gpus_per_instance`) or names it in
//!    the catalog (`instance` with optional `cloud`, `region`, `pricing`; or `cluster` of the
//!    overlay);
//! 2. the catalog's price of the device's GPU model in the report's price context (cloud,
//!    region, pricing model), through [`Catalog::gpu_hour_price`]'s fallback chain;
//! 3. nothing: the device is reported unpriced with a warning, and its dollars are not counted
//!    (never a made-up price).
//!
//! A MIG instance costs its share of the parent GPU: compute slices over the parent's slices
//! (7 on A100/H100/H200, 4 on A30). Every [`Quote`] says where it came from.

use serde::{Deserialize, Serialize};

use crate::sample::{DeviceInfo, DeviceKey};
use gpuwise_catalog::gpu;
use gpuwise_catalog::{Catalog, GpuSpec, PriceQuery, Pricing};

/// A price per GPU-hour with its provenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quote {
    /// Dollars per (whole) GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// Where the number came from, in words.
    pub source: String,
    /// Date of the price, when known (`YYYY-MM-DD`).
    pub as_of: Option<String>,
    /// How the catalog's answer differs from the question (another region, cloud or pricing
    /// model), when it does.
    pub fallback: Option<String>,
    /// Pricing model (`on-demand`, `spot`, `1y`, `3y`) when known: the catalog's, or a rule's
    /// `pricing` (a rule with its own price and no `pricing`, or an owned cluster: unknown).
    pub pricing: Option<&'static str>,
    /// Cloud of the price: the catalog row's, or a rule's `cloud` (`None`: not said).
    pub cloud: Option<String>,
    /// Region of the price, likewise.
    pub region: Option<String>,
}

/// A rule's price and where it came from.
struct RulePrice {
    usd: f64,
    source: String,
    as_of: Option<String>,
    cloud: Option<String>,
    region: Option<String>,
}

/// Where devices without a price rule are priced: cloud, region, pricing model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceContext {
    /// Cloud (`aws`, `gcp`, …); `None`: the reference clouds.
    pub cloud: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Pricing model (default on-demand).
    pub pricing: Option<Pricing>,
}

/// A rule of the user's price file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceRule {
    /// Host name glob (`gpu-a-*`).
    pub host: Option<String>,
    /// GPU model: a canonical name or any printed name (`A100-SXM4-80GB`, `NVIDIA A10G`).
    pub model: Option<String>,
    /// A label, `key=value` (`namespace=ml-serving`).
    pub label: Option<String>,
    /// Dollars per GPU-hour.
    pub usd_per_gpu_hour: Option<f64>,
    /// Dollars per instance-hour (with `gpus_per_instance`, or `instance` from the catalog).
    pub usd_per_instance_hour: Option<f64>,
    /// GPUs in the instance.
    pub gpus_per_instance: Option<u32>,
    /// Instance type: recorded, or looked up in the catalog when no price is given.
    pub instance: Option<String>,
    /// Cloud of `instance` for the catalog look-up.
    pub cloud: Option<String>,
    /// Region of `instance` for the catalog look-up (default: its cheapest region).
    pub region: Option<String>,
    /// Pricing model: recorded, and used for the catalog look-up (`on-demand`, `spot`, `1y`, `3y`).
    pub pricing: Option<String>,
    /// A private cluster of the catalog overlay, priced by its TCO.
    pub cluster: Option<String>,
    /// Free text shown in the price source.
    pub note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    #[serde(default, rename = "rule")]
    rules: Vec<PriceRule>,
}

/// A problem with a price file.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// Not valid TOML, or unknown keys.
    #[error("`{origin}` is not a valid price file: {message}")]
    Syntax {
        /// File name.
        origin: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A rule with a problem.
    #[error("`{origin}` rule {index}: {message}")]
    Rule {
        /// File name.
        origin: String,
        /// 1-based rule number.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

#[derive(Clone, Debug)]
struct Compiled {
    host: Option<glob::Pattern>,
    model: Option<String>,
    label: Option<(String, String)>,
    quote: Quote,
}

/// User rules plus the catalog.
#[derive(Clone, Debug)]
pub struct PriceBook {
    rules: Vec<Compiled>,
    catalog: Catalog,
    context: PriceContext,
}

impl PriceBook {
    /// Only the catalog, priced in `context`.
    #[must_use]
    pub fn new(catalog: Catalog, context: PriceContext) -> Self {
        Self {
            rules: Vec::new(),
            catalog,
            context,
        }
    }

    /// The catalog in use.
    #[must_use]
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The cloud, region and pricing catalog prices are taken in.
    #[must_use]
    pub fn context(&self) -> &PriceContext {
        &self.context
    }

    /// Add the rules of a price file (`origin` names it in messages and price sources).
    pub fn with_rules(mut self, text: &str, origin: &str) -> Result<Self, PriceError> {
        let file: PriceFile = toml::from_str(text).map_err(|e| PriceError::Syntax {
            origin: origin.to_owned(),
            message: gpuwise_catalog::toml_message(&e, text),
        })?;
        for (i, rule) in file.rules.into_iter().enumerate() {
            let index = i + 1;
            let err = |message: String| PriceError::Rule {
                origin: origin.to_owned(),
                index,
                message,
            };
            let compiled = self
                .compile(&rule, &format!("{origin} rule {index}"))
                .map_err(err)?;
            self.rules.push(compiled);
        }
        Ok(self)
    }

    /// One rule: its price (with where it came from) and what it matches.
    fn compile(&self, rule: &PriceRule, name: &str) -> Result<Compiled, String> {
        let RulePrice {
            usd,
            mut source,
            as_of,
            cloud,
            region,
        } = self.rule_price(rule, name)?;
        let usd = gpuwise_catalog::check_gpu_hour_price(usd).map_err(|e| e.to_string())?;
        let looked_up = rule.usd_per_gpu_hour.is_none()
            && rule.usd_per_instance_hour.is_none()
            && rule.cluster.is_none();
        let pricing = match rule.pricing.as_deref() {
            Some(p) => Pricing::parse(p).ok().map(Pricing::as_str),
            None if looked_up => Some(Pricing::OnDemand.as_str()),
            None => None,
        };
        if rule.usd_per_gpu_hour.is_some() || rule.usd_per_instance_hour.is_some() {
            for extra in [&rule.instance, &rule.pricing, &rule.note]
                .into_iter()
                .flatten()
            {
                source.push_str(", ");
                source.push_str(extra);
            }
        } else if let Some(n) = &rule.note {
            source.push_str(", ");
            source.push_str(n);
        }
        let host = rule
            .host
            .as_deref()
            .map(glob::Pattern::new)
            .transpose()
            .map_err(|e| format!("`host` is not a valid glob: {e}"))?;
        let model = match rule.model.as_deref() {
            Some(m) => Some(
                self.catalog
                    .resolve(m)
                    .ok_or_else(|| format!("unknown GPU model `{m}`"))?
                    .name
                    .clone(),
            ),
            None => None,
        };
        let label = match rule.label.as_deref() {
            Some(l) => {
                let (k, v) = l
                    .split_once('=')
                    .ok_or_else(|| format!("`label` must be `key=value`, got `{l}`"))?;
                Some((k.trim().to_owned(), v.trim().to_owned()))
            }
            None => None,
        };
        Ok(Compiled {
            host,
            model,
            label,
            quote: Quote {
                usd_per_gpu_hour: usd,
                source,
                as_of,
                fallback: None,
                pricing,
                cloud,
                region,
            },
        })
    }

    /// A rule's $ per GPU-hour, its source text and as-of date: given directly, per instance
    /// and its GPUs, a catalog instance, or an overlay cluster, exactly one of them.
    fn rule_price(&self, rule: &PriceRule, name: &str) -> Result<RulePrice, String> {
        let source = name.to_owned();
        let given = |usd: f64, source: String| RulePrice {
            usd,
            source,
            as_of: None,
            cloud: rule.cloud.clone(),
            region: rule.region.clone(),
        };
        match (
            rule.usd_per_gpu_hour,
            rule.usd_per_instance_hour,
            &rule.instance,
            &rule.cluster,
        ) {
            (Some(_), Some(_), ..) => {
                Err("give `usd_per_gpu_hour` or `usd_per_instance_hour`, not both".into())
            }
            (Some(p), None, ..) => Ok(given(p, source)),
            (None, Some(p), ..) => match rule.gpus_per_instance {
                Some(n) if n > 0 => Ok(given(p / f64::from(n), source)),
                _ => Err("`usd_per_instance_hour` needs `gpus_per_instance` (at least 1)".into()),
            },
            (None, None, _, Some(cluster)) => {
                let row = self
                    .catalog
                    .instances
                    .iter()
                    .find(|r| r.cloud == "onprem" && r.instance_type == *cluster)
                    .ok_or_else(|| {
                        format!("cluster `{cluster}` is not in the catalog overlay (--overlay)")
                    })?;
                let usd = row
                    .on_demand_usd_per_hour
                    .ok_or_else(|| format!("cluster `{cluster}` has no price in the overlay"))?
                    / row.gpu_count;
                Ok(RulePrice {
                    usd,
                    source: format!("{source}: {}", row.source),
                    as_of: Some(row.as_of.clone()),
                    cloud: Some(row.cloud.clone()),
                    region: Some(row.region.clone()).filter(|r| !r.is_empty()),
                })
            }
            (None, None, Some(instance), None) => self.instance_price(rule, instance, &source),
            (None, None, None, None) => Err(
                "no price: give `usd_per_gpu_hour`, `usd_per_instance_hour`, `instance` or `cluster`"
                    .into(),
            ),
        }
    }

    /// The cheapest catalog row of `instance` (in the rule's cloud and region) per GPU-hour.
    fn instance_price(
        &self,
        rule: &PriceRule,
        instance: &str,
        source: &str,
    ) -> Result<RulePrice, String> {
        let pricing = match rule.pricing.as_deref() {
            Some(p) => Pricing::parse(p).map_err(|e| e.to_string())?,
            None => Pricing::OnDemand,
        };
        let (row, listed, per_gpu) = self
            .catalog
            .instances
            .iter()
            .filter(|r| r.instance_type == instance)
            .filter(|r| rule.cloud.as_ref().is_none_or(|c| *c == r.cloud))
            .filter(|r| rule.region.as_ref().is_none_or(|g| *g == r.region))
            .filter_map(|r| Some((r, r.price(pricing)?, r.per_gpu(pricing)?)))
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .ok_or_else(|| {
                format!(
                    "instance `{instance}`{}{} has no {pricing} price in the catalog",
                    rule.cloud
                        .as_deref()
                        .map_or(String::new(), |c| format!(" on {c}")),
                    rule.region
                        .as_deref()
                        .map_or(String::new(), |r| format!(" in {r}"))
                )
            })?;
        let source = format!(
            "{source}: {} {} {} {pricing} ${listed}/h ÷ {} GPUs ({}, {})",
            row.cloud, row.instance_type, row.region, row.gpu_count, row.source, row.as_of
        );
        Ok(RulePrice {
            usd: per_gpu,
            source,
            as_of: Some(row.as_of.clone()),
            cloud: Some(row.cloud.clone()),
            region: Some(row.region.clone()),
        })
    }

    /// The price of one whole GPU-hour of this device, or `None` when nothing is known.
    #[must_use]
    pub fn quote(
        &self,
        key: &DeviceKey,
        info: &DeviceInfo,
        model: Option<&GpuSpec>,
    ) -> Option<Quote> {
        for c in &self.rules {
            let host_ok = c.host.as_ref().is_none_or(|p| p.matches(&key.host));
            let model_ok = c
                .model
                .as_ref()
                .is_none_or(|m| model.is_some_and(|x| x.name == *m));
            let label_ok = c
                .label
                .as_ref()
                .is_none_or(|(k, v)| info.labels.get(k).is_some_and(|vals| vals.contains_key(v)));
            if host_ok && model_ok && label_ok {
                return Some(c.quote.clone());
            }
        }
        let model = model?;
        let q = self.catalog.gpu_hour_price(&PriceQuery {
            gpu: &model.name,
            cloud: self.context.cloud.as_deref(),
            region: self.context.region.as_deref(),
            pricing: self.context.pricing.unwrap_or(Pricing::OnDemand),
        })?;
        Some(Quote {
            usd_per_gpu_hour: q.usd_per_gpu_hour,
            source: format!("catalog: {}", q.describe()),
            as_of: Some(q.as_of.clone()),
            fallback: q.note.clone(),
            pricing: Some(q.pricing.as_str()),
            cloud: Some(q.cloud.clone()),
            region: Some(q.region.clone()),
        })
    }
}

/// Share of the parent GPU a device is: 1 for a whole GPU, slices / parent slices for a MIG
/// instance; `None` when that cannot be known (the parent's model is not in the catalog or has
/// no MIG profiles, or the profile names no slices): never a guess of 7 slices.
#[must_use]
pub fn gpu_share(info: &DeviceInfo, model: Option<&GpuSpec>) -> Option<f64> {
    let Some(profile) = info.mig_profile.as_deref() else {
        return Some(1.0);
    };
    let parent = model.and_then(GpuSpec::mig_slices)?;
    let slices = gpu::mig_slices(profile)?;
    Some((f64::from(slices) / f64::from(parent)).min(1.0))
}

/// Dollars as every output writes them: thousands separated, cents below $100 (`$75,208`,
/// `$3.06`, `-$12.50`). One formatter, so a figure reads the same in a table, a violation and a
/// notification ($75208.24 in one and $75,208 in another before).
#[must_use]
pub fn usd(v: f64) -> String {
    let abs = v.abs();
    let s = if abs >= 100.0 {
        format!("{abs:.0}")
    } else {
        format!("{abs:.2}")
    };
    let (int, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(a, b)| (a, Some(b)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    format!("{}${out}", if v < 0.0 { "-" } else { "" })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every dollar figure reads the same way, wherever it is printed.
    #[test]
    fn dollars_read_one_way() {
        assert_eq!(usd(75_208.24), "$75,208");
        assert_eq!(usd(1_234_567.0), "$1,234,567");
        assert_eq!(usd(3.06), "$3.06");
        assert_eq!(usd(-12.5), "-$12.50");
        assert_eq!(usd(0.0), "$0.00");
    }

    fn book() -> PriceBook {
        PriceBook::new(Catalog::builtin(), PriceContext::default())
    }

    #[test]
    fn first_matching_rule_wins_then_catalog() {
        let book = book()
            .with_rules(
                r#"
            [[rule]]
            host = "train-*"
            model = "NVIDIA A100-SXM4-80GB"
            usd_per_instance_hour = 20.0
            gpus_per_instance = 8
            instance = "p4de.24xlarge"
            [[rule]]
            label = "namespace=notebooks"
            usd_per_gpu_hour = 1.5
            [[rule]]
            host = "gcp-*"
            instance = "a2-highgpu-1g"
            cloud = "gcp"
            region = "us-central1"
            pricing = "spot"
            "#,
                "prices.toml",
            )
            .expect("valid");
        let c = Catalog::builtin();
        let a100 = c.resolve("A100-SXM4-80GB");
        let q = book
            .quote(
                &DeviceKey::new("train-1", "GPU-1"),
                &DeviceInfo::default(),
                a100,
            )
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 2.5).abs() < 1e-12);
        assert_eq!(q.source, "prices.toml rule 1, p4de.24xlarge");
        let mut info = DeviceInfo::default();
        info.add_label("namespace", "notebooks", 1);
        let q = book
            .quote(&DeviceKey::new("nb-1", "GPU-2"), &info, c.resolve("T4"))
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 1.5).abs() < 1e-12);
        let q = book
            .quote(
                &DeviceKey::new("gcp-1", "GPU-9"),
                &DeviceInfo::default(),
                c.resolve("A100-SXM4-40GB"),
            )
            .expect("quote");
        assert!(
            q.source.contains("gcp a2-highgpu-1g us-central1 spot"),
            "{}",
            q.source
        );
        let q = book
            .quote(
                &DeviceKey::new("x", "GPU-3"),
                &DeviceInfo::default(),
                c.resolve("T4"),
            )
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 0.526).abs() < 1e-12);
        assert!(
            q.source
                .starts_with("catalog: aws g4dn.xlarge us-east-1 on-demand"),
            "{}",
            q.source
        );
        assert!(
            book.quote(&DeviceKey::new("x", "GPU-4"), &DeviceInfo::default(), None)
                .is_none()
        );
    }

    #[test]
    fn bad_price_files_say_what_is_wrong() {
        for (text, needle) in [
            ("[[rule]]\nusd_per_gpu_hour = \"x\"", "invalid type"),
            ("[[rule]]\nhost = \"a\"", "rule 1: no price"),
            (
                "[[rule]]\ninstance = \"p9.imaginary\"",
                "has no on-demand price in the catalog",
            ),
            (
                "[[rule]]\ncluster = \"dc9\"",
                "cluster `dc9` is not in the catalog overlay",
            ),
            (
                "[[rule]]\nmodel = \"Voodoo 2\"\nusd_per_gpu_hour = 1",
                "unknown GPU model `Voodoo 2`",
            ),
            (
                "[[rule]]\nusd_per_instance_hour = 3",
                "needs `gpus_per_instance`",
            ),
            ("[[rule]]\nusd_per_gpu_hour = -1", "above zero"),
            ("[[rule]]\nusd_per_gpu_hour = 0", "above zero"),
            (
                "[[rule]]\nusd_per_gpu_hour = 1e308",
                "more than any GPU rents for",
            ),
            ("[[rule]]\nusd_per_gpu_hour = nan", "above zero"),
            (
                "[[rule]]\nlabel = \"team\"\nusd_per_gpu_hour = 1",
                "`key=value`",
            ),
            ("[[rule]]\nprice = 1", "unknown field"),
            (
                "[[rule]]\ninstance = \"p4d.24xlarge\"\npricing = \"forever\"",
                "`forever` is not one of",
            ),
        ] {
            let err = book()
                .with_rules(text, "p.toml")
                .expect_err(text)
                .to_string();
            assert!(err.contains(needle), "{err} should contain {needle}");
        }
    }

    #[test]
    fn mig_share() {
        let c = Catalog::builtin();
        let mut info = DeviceInfo {
            mig_profile: Some("3g.40gb".into()),
            ..DeviceInfo::default()
        };
        let share = |i: &DeviceInfo, m| gpu_share(i, m).expect("known share");
        assert!((share(&info, c.resolve("H100-SXM5-80GB")) - 3.0 / 7.0).abs() < 1e-12);
        info.mig_profile = Some("2g.12gb".into());
        assert!((share(&info, c.resolve("A30")) - 0.5).abs() < 1e-12);
        assert_eq!(gpu_share(&DeviceInfo::default(), None), Some(1.0));
        // A MIG instance of a GPU the catalog does not know: its share is unknown, not 3/7.
        assert_eq!(gpu_share(&info, None), None);
    }
}
