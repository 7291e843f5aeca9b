//! The config file (`gpuwise.toml`): defaults for `report` flags. Precedence: flag, then
//! environment variable, then config file, then built-in default. See `config.example.toml`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Keys of the config file; each mirrors a flag (of `report`, or of `allocate` and `check`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// The file this was read from (none: no file).
    #[serde(skip)]
    pub path: Option<PathBuf>,
    pub tz: Option<String>,
    pub format: Option<String>,
    pub prices: Option<PathBuf>,
    pub teams: Option<PathBuf>,
    pub instances: Option<PathBuf>,
    pub overlay: Option<PathBuf>,
    pub cloud: Option<String>,
    pub region: Option<String>,
    pub pricing: Option<String>,
    pub group_by: Option<String>,
    pub idle_threshold_pct: Option<f32>,
    pub min_idle: Option<String>,
    pub held_idle_mib: Option<f32>,
    pub max_gap: Option<String>,
    pub idle_share_pct: Option<f64>,
    pub underutilized_below_pct: Option<f64>,
    pub saturated_above_pct: Option<f64>,
    pub stale_price_days: Option<u32>,
    pub top: Option<usize>,
    /// `allocate`/`check`: showback or chargeback.
    pub allocation_mode: Option<String>,
    /// `allocate`/`check`: where idle and shared cost go in chargeback.
    pub idle_policy: Option<String>,
    /// `allocate`/`check`: teams whose whole cost is shared.
    pub shared_teams: Option<Vec<String>>,
    /// `check`: the policy file.
    pub policy: Option<PathBuf>,
    /// `serve`: the address to listen on.
    pub listen: Option<String>,
    /// `serve`: names clients may reach the server by (`--allowed-host`).
    pub allowed_hosts: Option<Vec<String>>,
    /// `serve`: how often files are looked at again.
    pub refresh: Option<String>,
    /// `serve`: the tile length.
    pub tile: Option<String>,
    /// `serve`: the data kept.
    pub retain: Option<String>,
}

impl Config {
    /// The flag's value, else the file's `key`, each with its origin.
    pub(crate) fn pick<T>(
        &self,
        flag: &str,
        given: Option<T>,
        key: &str,
        file: Option<T>,
    ) -> Option<Picked<T>> {
        match (given, file) {
            (Some(value), _) => Some(Picked {
                value,
                origin: flag.to_owned(),
            }),
            (None, Some(value)) => Some(Picked {
                value,
                origin: match &self.path {
                    Some(p) => format!("`{}` {key}", p.display()),
                    None => key.to_owned(),
                },
            }),
            (None, None) => None,
        }
    }

    /// Load `explicit`, else `./gpuwise.toml` when it exists, else nothing. Relative paths in
    /// the file are relative to the file.
    pub(crate) fn load(explicit: Option<&Path>) -> anyhow::Result<Self> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => {
                let p = PathBuf::from("gpuwise.toml");
                if !p.is_file() {
                    return Ok(Self::default());
                }
                // A file picked up from the working directory changes results: said once.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    crate::printer::info(
                        "using ./gpuwise.toml, the config file in this directory (--config FILE names another)",
                    );
                });
                p
            }
        };
        let text = fs_err::read_to_string(&path)?;
        let mut c: Config = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "`{}` is not a valid gpuwise config: {}",
                path.display(),
                gpuwise_catalog::toml_message(&e, &text)
            )
        })?;
        c.path = Some(path.clone());
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for p in [
            &mut c.prices,
            &mut c.teams,
            &mut c.policy,
            &mut c.instances,
            &mut c.overlay,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(c)
    }
}

/// A setting and where it came from, for messages: `--group-by`, or `` `gpuwise.toml` group_by``
/// (a bad value in the file was reported as the flag's, without naming the file).
pub(crate) struct Picked<T> {
    pub value: T,
    pub origin: String,
}

/// `--format`, else the config file's, else `table`.
pub(crate) fn output_format(
    flag: Option<&str>,
    cfg: &Config,
) -> anyhow::Result<gpuwise_render::Format> {
    gpuwise_render::Format::parse(flag.or(cfg.format.as_deref()).unwrap_or("table"))
        .map_err(|e| anyhow::anyhow!("--format: {e}"))
}
