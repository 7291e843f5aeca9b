//! What the user names on the command line, read into typed values: the catalog (built in,
//! or `--instances` plus `--overlay`), a GPU by its name, a price quote that must not fall
//! back, a spot trace file. The settings layer ([`crate::fleet`]) and the commands read their
//! inputs through here, so no command reaches into another for them.

use anyhow::{anyhow, bail};
use gpuwise_catalog::{Catalog, Overlay, Pricing, parse_instances};
use gpuwise_sim::trace::Trace;

use crate::cli::CatalogSourceArgs;

/// The catalog the user asked for: built in, or `--instances FILE`, plus `--overlay FILE`.
pub(crate) fn catalog(args: &CatalogSourceArgs) -> anyhow::Result<Catalog> {
    let mut catalog = Catalog::builtin();
    if let Some(path) = &args.instances {
        let text = fs_err::read_to_string(path)?;
        catalog.instances = parse_instances(&text, &path.display().to_string())?;
    }
    if let Some(path) = &args.overlay {
        let origin = path.display().to_string();
        let overlay = Overlay::parse(&fs_err::read_to_string(path)?, &origin)?;
        catalog.apply(&overlay, &origin)?;
    }
    Ok(catalog)
}

/// The one GPU a typed name means (`V100` → `V100-SXM2-16GB` when that is the only one), or an
/// error listing the candidates.
pub(crate) fn one_gpu<'c>(
    catalog: &'c Catalog,
    typed: &str,
) -> anyhow::Result<&'c gpuwise_catalog::GpuSpec> {
    if let Some(g) = catalog.resolve(typed) {
        return Ok(g);
    }
    match catalog
        .lookup(typed)
        .map_err(|e| anyhow!("--gpu: {e}"))?
        .as_slice()
    {
        [one] => Ok(one),
        many => bail!(
            "--gpu: `{typed}` could be {}; name one",
            many.iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The catalog's GPU-hour price of `gpu` in exactly the pricing asked, and in the cloud asked
/// when one is: a simulator must not price spot as on demand, or one cloud at another's price,
/// without a word (the catalog's lookup falls back; its quote says so, and this refuses it).
pub(crate) fn exact_quote(
    catalog: &Catalog,
    gpu: &str,
    cloud: Option<&str>,
    region: Option<&str>,
    pricing: Pricing,
) -> Option<gpuwise_catalog::Quote> {
    catalog
        .gpu_hour_price(&gpuwise_catalog::PriceQuery {
            gpu,
            cloud,
            region,
            pricing,
        })
        .filter(|q| q.pricing == pricing && cloud.is_none_or(|c| q.cloud.eq_ignore_ascii_case(c)))
}

/// Read one trace, its format given or found from its content.
pub(crate) fn read_trace(
    path: &std::path::Path,
    format: &str,
    tick_s: f64,
) -> anyhow::Result<Trace> {
    let name = path.display().to_string();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut gpuwise_sources::input::open(&gpuwise_sources::Input {
            path: Some(path.to_path_buf()),
            name: name.clone(),
            found_in_dir: false,
        })?,
        &mut text,
    )?;
    let kind = match format {
        "auto" => {
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if text.trim_start().starts_with('{') {
                "skypilot"
            } else if first.split(',').count() >= 3 {
                "events"
            } else {
                "csv"
            }
        }
        other => other,
    };
    Ok(match kind {
        "skypilot" => Trace::from_skypilot_json(&text, &name)?,
        "events" => Trace::from_events_csv(&text, tick_s, &name)?,
        "csv" => Trace::from_generic_csv(&text, tick_s, &name)?,
        other => bail!("--trace-format `{other}` is not one of auto, skypilot, events, csv"),
    })
}
