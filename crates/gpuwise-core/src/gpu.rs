//! # GPU model names
//!
//! Sources print the same GPU under many names (`NVIDIA A100-SXM4-80GB`, `NVIDIA A100 80GB
//! PCIe`, `Tesla T4`, `NVIDIA H100 80GB HBM3`, MIG devices `… MIG 1g.10gb`). [`resolve`] maps a
//! printed name to one canonical model id (the names of `gpu-specs.csv` in the shared facts);
//! an unknown name is returned as unknown, never guessed from a substring.
//!
//! Memory sizes below are datasheet facts (GB as printed by the vendor), used to tell apart
//! variants whose names do not say (`NVIDIA A100-SXM4-40GB` vs `…-80GB` do; `NVIDIA H200`
//! does not need to). Source: vendor datasheets as collected in `shared/data/gpu-specs.csv`.

/// A canonical GPU model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuModel {
    /// Canonical id (`A100-SXM4-80GB`).
    pub id: &'static str,
    /// Memory on the datasheet, GB.
    pub memory_gb: u32,
}

const MODELS: &[GpuModel] = &[
    GpuModel {
        id: "T4",
        memory_gb: 16,
    },
    GpuModel {
        id: "L4",
        memory_gb: 24,
    },
    GpuModel {
        id: "A10",
        memory_gb: 24,
    },
    GpuModel {
        id: "A10G",
        memory_gb: 24,
    },
    GpuModel {
        id: "A30",
        memory_gb: 24,
    },
    GpuModel {
        id: "L40",
        memory_gb: 48,
    },
    GpuModel {
        id: "L40S",
        memory_gb: 48,
    },
    GpuModel {
        id: "V100-SXM2-16GB",
        memory_gb: 16,
    },
    GpuModel {
        id: "V100-SXM2-32GB",
        memory_gb: 32,
    },
    GpuModel {
        id: "V100-PCIE-16GB",
        memory_gb: 16,
    },
    GpuModel {
        id: "V100-PCIE-32GB",
        memory_gb: 32,
    },
    GpuModel {
        id: "A100-SXM4-40GB",
        memory_gb: 40,
    },
    GpuModel {
        id: "A100-SXM4-80GB",
        memory_gb: 80,
    },
    GpuModel {
        id: "A100-PCIE-40GB",
        memory_gb: 40,
    },
    GpuModel {
        id: "A100-PCIE-80GB",
        memory_gb: 80,
    },
    GpuModel {
        id: "H100-SXM5-80GB",
        memory_gb: 80,
    },
    GpuModel {
        id: "H100-PCIE-80GB",
        memory_gb: 80,
    },
    GpuModel {
        id: "H100-NVL-94GB",
        memory_gb: 94,
    },
    GpuModel {
        id: "H200-SXM-141GB",
        memory_gb: 141,
    },
    GpuModel {
        id: "H200-NVL-141GB",
        memory_gb: 141,
    },
    GpuModel {
        id: "B200",
        memory_gb: 180,
    },
    GpuModel {
        id: "MI300X",
        memory_gb: 192,
    },
];

/// Printed names (normalized: lower case, `nvidia `/`tesla `/`amd ` prefixes and `-`/`_`
/// spacing folded by [`normalize`]) → canonical id.
const ALIASES: &[(&str, &str)] = &[
    ("t4", "T4"),
    ("l4", "L4"),
    ("a10", "A10"),
    ("a10g", "A10G"),
    ("a30", "A30"),
    ("l40", "L40"),
    ("l40s", "L40S"),
    ("v100 sxm2 16gb", "V100-SXM2-16GB"),
    ("v100 sxm2 32gb", "V100-SXM2-32GB"),
    ("v100 pcie 16gb", "V100-PCIE-16GB"),
    ("v100 pcie 32gb", "V100-PCIE-32GB"),
    ("a100 sxm4 40gb", "A100-SXM4-40GB"),
    ("a100 sxm4 80gb", "A100-SXM4-80GB"),
    ("a100 pcie 40gb", "A100-PCIE-40GB"),
    ("a100 80gb pcie", "A100-PCIE-80GB"),
    ("a100 pcie 80gb", "A100-PCIE-80GB"),
    ("h100 80gb hbm3", "H100-SXM5-80GB"),
    ("h100 sxm5 80gb", "H100-SXM5-80GB"),
    ("h100 pcie", "H100-PCIE-80GB"),
    ("h100 80gb pcie", "H100-PCIE-80GB"),
    ("h100 nvl", "H100-NVL-94GB"),
    ("h200", "H200-SXM-141GB"),
    ("h200 nvl", "H200-NVL-141GB"),
    ("b200", "B200"),
    ("instinct mi300x", "MI300X"),
    ("mi300x", "MI300X"),
];

/// Lower-case, drop vendor prefixes, fold `-`, `_` and repeated spaces into one space, and cut
/// a MIG suffix (` mig 1g.10gb`). `NVIDIA A100-SXM4-80GB` → `a100 sxm4 80gb`.
#[must_use]
pub fn normalize(name: &str) -> String {
    let mut s = name.trim().to_ascii_lowercase().replace(['-', '_'], " ");
    if let Some(i) = s.find(" mig ") {
        s.truncate(i);
    }
    let mut words: Vec<&str> = s.split_whitespace().collect();
    while matches!(words.first(), Some(&("nvidia" | "tesla" | "amd"))) {
        words.remove(0);
    }
    words.join(" ")
}

/// Resolve a printed product name (or a canonical id) to a model; `None` when unknown.
#[must_use]
pub fn resolve(name: &str) -> Option<GpuModel> {
    let norm = normalize(name);
    let id = ALIASES
        .iter()
        .find(|(alias, _)| *alias == norm)
        .map(|(_, id)| *id)
        .or_else(|| {
            MODELS
                .iter()
                .find(|m| normalize(m.id) == norm)
                .map(|m| m.id)
        })?;
    MODELS.iter().copied().find(|m| m.id == id)
}

/// All known models.
#[must_use]
pub fn models() -> &'static [GpuModel] {
    MODELS
}

/// Compute slices of a MIG profile name (`3g.40gb` → 3, `1c.3g.71gb` → 3), `None` if the name
/// has no `<n>g.` part. DCGM can report a profile under another name than configured
/// (`7g.79gb` for an A100 80GB PCIe), so never match on the memory part.
#[must_use]
pub fn mig_slices(profile: &str) -> Option<u32> {
    profile
        .split('.')
        .find_map(|part| part.strip_suffix('g').and_then(|n| n.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_names_resolve() {
        for (printed, id) in [
            ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
            ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
            ("Tesla T4", "T4"),
            ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
            ("NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"),
            ("NVIDIA A10G", "A10G"),
            ("NVIDIA H200", "H200-SXM-141GB"),
            ("NVIDIA L40S", "L40S"),
            ("NVIDIA A30", "A30"),
            ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
            ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "H100-SXM5-80GB"),
            ("A100-SXM4-40GB", "A100-SXM4-40GB"),
        ] {
            assert_eq!(resolve(printed).map(|m| m.id), Some(id), "{printed}");
        }
    }

    #[test]
    fn unknown_names_are_not_guessed() {
        for printed in [
            "Quadro T2000",
            "NVIDIA GeForce RTX 3090",
            "NVIDIA A100",
            "NVIDIA RTX 2000 Ada Generation",
            "",
        ] {
            assert_eq!(resolve(printed), None, "{printed}");
        }
    }

    #[test]
    fn mig_profile_slices() {
        assert_eq!(mig_slices("3g.40gb"), Some(3));
        assert_eq!(mig_slices("1c.3g.71gb"), Some(3));
        assert_eq!(mig_slices("7g.79gb"), Some(7));
        assert_eq!(mig_slices("weird"), None);
    }
}
