//! # Prices: what one GPU-hour of a device costs, and where that number came from
//!
//! Resolution order for a device (first hit wins):
//! 1. the first rule of the user's price file (`--prices FILE`) whose matchers all match the
//!    device (`host` glob, `model`, `label = "key=value"`);
//! 2. the built-in reference price of the device's GPU model (`data/reference-prices.toml`:
//!    one public on-demand list price per model, with instance, source and date);
//! 3. nothing: the device is reported unpriced with a warning, and its dollars are not counted
//!    (never a made-up price).
//!
//! A MIG instance costs its share of the parent GPU: compute slices over the parent's slices
//! (7 on A100/H100/H200/B200, 4 on A30). Every [`Quote`] says where it came from.

use serde::{Deserialize, Serialize};

use crate::gpu::{self, GpuModel};
use crate::sample::{DeviceInfo, DeviceKey};

/// A price per GPU-hour with its provenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quote {
    /// Dollars per (whole) GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// Where the number came from, in words.
    pub source: String,
    /// Date of the price, when known (`YYYY-MM-DD`).
    pub as_of: Option<String>,
}

/// A rule of the user's price file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriceRule {
    /// Host name glob (`gpu-a-*`).
    pub host: Option<String>,
    /// GPU model: a canonical id or any printed name (`A100-SXM4-80GB`, `NVIDIA A10G`).
    pub model: Option<String>,
    /// A label, `key=value` (`namespace=ml-serving`).
    pub label: Option<String>,
    /// Dollars per GPU-hour.
    pub usd_per_gpu_hour: Option<f64>,
    /// Dollars per instance-hour (with `gpus_per_instance`).
    pub usd_per_instance_hour: Option<f64>,
    /// GPUs in the instance.
    pub gpus_per_instance: Option<u32>,
    /// Instance type, for the record (`p4d.24xlarge`).
    pub instance: Option<String>,
    /// Pricing model, for the record (`on-demand`, `spot`, `1y`, `3y`, `on-prem`).
    pub pricing: Option<String>,
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
    rule: PriceRule,
    host: Option<glob::Pattern>,
    model: Option<&'static str>,
    label: Option<(String, String)>,
    usd_per_gpu_hour: f64,
    index: usize,
}

/// A built-in reference price.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
pub struct ReferencePrice {
    /// Canonical model id.
    pub model: String,
    /// Dollars per GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// The instance and region the price is from.
    pub instance: String,
    /// Publisher of the price.
    pub source: String,
    /// Date of the price.
    pub as_of: String,
}

#[derive(Deserialize)]
struct ReferenceFile {
    gpu: Vec<ReferencePrice>,
}

/// The built-in reference prices.
///
/// # Panics
/// Never in a released build: the file is compiled in and checked by a unit test.
#[must_use]
pub fn reference_prices() -> Vec<ReferencePrice> {
    let file: ReferenceFile = toml::from_str(include_str!("../data/reference-prices.toml"))
        .expect("built-in reference-prices.toml is valid (unit-tested)");
    file.gpu
}

/// User rules plus reference prices.
#[derive(Clone, Debug)]
pub struct PriceBook {
    origin: String,
    rules: Vec<Compiled>,
    reference: Vec<ReferencePrice>,
}

impl Default for PriceBook {
    fn default() -> Self {
        Self {
            origin: String::new(),
            rules: Vec::new(),
            reference: reference_prices(),
        }
    }
}

impl PriceBook {
    /// Parse a price file (`origin` names it in messages and price sources).
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PriceError> {
        let file: PriceFile = toml::from_str(text).map_err(|e| PriceError::Syntax {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        let mut rules = Vec::new();
        for (i, rule) in file.rules.into_iter().enumerate() {
            let err = |message: String| PriceError::Rule {
                origin: origin.to_owned(),
                index: i + 1,
                message,
            };
            let usd = match (
                rule.usd_per_gpu_hour,
                rule.usd_per_instance_hour,
                rule.gpus_per_instance,
            ) {
                (Some(p), None, _) => p,
                (None, Some(p), Some(n)) if n > 0 => p / f64::from(n),
                (None, Some(_), _) => {
                    return Err(err(
                        "`usd_per_instance_hour` needs `gpus_per_instance` (at least 1)".into(),
                    ));
                }
                (Some(_), Some(_), _) => {
                    return Err(err(
                        "give `usd_per_gpu_hour` or `usd_per_instance_hour`, not both".into(),
                    ));
                }
                (None, None, _) => {
                    let hint = rule.instance.as_deref().map_or(String::new(), |t| {
                        format!(" (instance `{t}`: looking an instance type up needs the price catalog, which is not built in yet)")
                    });
                    return Err(err(format!(
                        "no price: give `usd_per_gpu_hour` or `usd_per_instance_hour`{hint}"
                    )));
                }
            };
            if !usd.is_finite() || usd < 0.0 {
                return Err(err(format!("price `{usd}` is not a non-negative number")));
            }
            let host = rule
                .host
                .as_deref()
                .map(glob::Pattern::new)
                .transpose()
                .map_err(|e| err(format!("`host` is not a valid glob: {e}")))?;
            let model = match rule.model.as_deref() {
                Some(m) => Some(
                    gpu::resolve(m)
                        .ok_or_else(|| err(format!("unknown GPU model `{m}`")))?
                        .id,
                ),
                None => None,
            };
            let label = match rule.label.as_deref() {
                Some(l) => {
                    let (k, v) = l
                        .split_once('=')
                        .ok_or_else(|| err(format!("`label` must be `key=value`, got `{l}`")))?;
                    Some((k.trim().to_owned(), v.trim().to_owned()))
                }
                None => None,
            };
            rules.push(Compiled {
                rule,
                host,
                model,
                label,
                usd_per_gpu_hour: usd,
                index: i + 1,
            });
        }
        Ok(Self {
            origin: origin.to_owned(),
            rules,
            reference: reference_prices(),
        })
    }

    /// The price of one whole GPU-hour of this device, or `None` when nothing is known.
    #[must_use]
    pub fn quote(
        &self,
        key: &DeviceKey,
        info: &DeviceInfo,
        model: Option<GpuModel>,
    ) -> Option<Quote> {
        for c in &self.rules {
            let host_ok = c.host.as_ref().is_none_or(|p| p.matches(&key.host));
            let model_ok = c.model.is_none_or(|m| model.is_some_and(|x| x.id == m));
            let label_ok = c
                .label
                .as_ref()
                .is_none_or(|(k, v)| info.labels.get(k).is_some_and(|vals| vals.contains_key(v)));
            if host_ok && model_ok && label_ok {
                let mut source = format!("{} rule {}", self.origin, c.index);
                for extra in [&c.rule.instance, &c.rule.pricing, &c.rule.note]
                    .into_iter()
                    .flatten()
                {
                    source.push_str(", ");
                    source.push_str(extra);
                }
                return Some(Quote {
                    usd_per_gpu_hour: c.usd_per_gpu_hour,
                    source,
                    as_of: None,
                });
            }
        }
        let model = model?;
        let r = self.reference.iter().find(|r| r.model == model.id)?;
        Some(Quote {
            usd_per_gpu_hour: r.usd_per_gpu_hour,
            source: format!("reference: {} ({}, {})", r.instance, r.source, r.as_of),
            as_of: Some(r.as_of.clone()),
        })
    }
}

/// Share of the parent GPU a device is: 1 for a whole GPU, slices / parent slices for MIG.
#[must_use]
pub fn gpu_share(info: &DeviceInfo, model: Option<GpuModel>) -> f64 {
    let Some(profile) = info.mig_profile.as_deref() else {
        return 1.0;
    };
    let parent = match model.map(|m| m.id) {
        Some("A30") => 4.0,
        _ => 7.0,
    };
    gpu::mig_slices(profile).map_or(1.0, |s| (f64::from(s) / parent).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_file_parses_and_every_model_is_known() {
        let refs = reference_prices();
        assert!(refs.len() >= 10);
        for r in refs {
            assert!(gpu::resolve(&r.model).is_some(), "{}", r.model);
            assert!(r.usd_per_gpu_hour > 0.0);
        }
    }

    #[test]
    fn first_matching_rule_wins_then_reference() {
        let book = PriceBook::from_toml(
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
            "#,
            "prices.toml",
        )
        .expect("valid");
        let a100 = gpu::resolve("A100-SXM4-80GB");
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
            .quote(&DeviceKey::new("nb-1", "GPU-2"), &info, gpu::resolve("T4"))
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 1.5).abs() < 1e-12);
        let q = book
            .quote(
                &DeviceKey::new("x", "GPU-3"),
                &DeviceInfo::default(),
                gpu::resolve("T4"),
            )
            .expect("quote");
        assert!((q.usd_per_gpu_hour - 0.526).abs() < 1e-12);
        assert!(q.source.starts_with("reference: aws g4dn.xlarge"));
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
                "[[rule]]\ninstance = \"p4d.24xlarge\"",
                "needs the price catalog",
            ),
            (
                "[[rule]]\nmodel = \"Voodoo 2\"\nusd_per_gpu_hour = 1",
                "unknown GPU model `Voodoo 2`",
            ),
            (
                "[[rule]]\nusd_per_instance_hour = 3",
                "needs `gpus_per_instance`",
            ),
            ("[[rule]]\nusd_per_gpu_hour = -1", "non-negative"),
            (
                "[[rule]]\nlabel = \"team\"\nusd_per_gpu_hour = 1",
                "`key=value`",
            ),
            ("[[rule]]\nprice = 1", "unknown field"),
        ] {
            let err = PriceBook::from_toml(text, "p.toml")
                .expect_err(text)
                .to_string();
            assert!(err.contains(needle), "{err} should contain {needle}");
        }
    }

    #[test]
    fn mig_share() {
        let mut info = DeviceInfo {
            mig_profile: Some("3g.40gb".into()),
            ..DeviceInfo::default()
        };
        assert!((gpu_share(&info, gpu::resolve("H100-SXM5-80GB")) - 3.0 / 7.0).abs() < 1e-12);
        info.mig_profile = Some("2g.12gb".into());
        assert!((gpu_share(&info, gpu::resolve("A30")) - 0.5).abs() < 1e-12);
        assert!((gpu_share(&DeviceInfo::default(), None) - 1.0).abs() < 1e-12);
    }
}
