//! # GPU names
//!
//! Sources print the same GPU under many names (`NVIDIA A100-SXM4-80GB`, `NVIDIA A100 80GB
//! PCIe`, `Tesla T4`, `NVIDIA H100 80GB HBM3`, MIG devices `… MIG 1g.10gb`). [`normalize`]
//! folds the spelling differences that carry no meaning, so that the catalog
//! ([`crate::Catalog::resolve`]) can match a printed name to exactly one entry by its
//! aliases; an unknown name stays unknown, never guessed from a substring.

/// Lower-case, drop vendor prefixes (`NVIDIA`, `Tesla`, `AMD`, `Intel`), fold `-`, `_` and
/// repeated spaces into one space, and cut a MIG suffix (` MIG 1g.10gb`).
/// `NVIDIA A100-SXM4-80GB` → `a100 sxm4 80gb`.
#[must_use]
pub fn normalize(name: &str) -> String {
    let mut s = name.trim().to_ascii_lowercase().replace(['-', '_'], " ");
    if let Some(i) = s.find(" mig ") {
        s.truncate(i);
    }
    let mut words: Vec<&str> = s.split_whitespace().collect();
    while matches!(words.first(), Some(&("nvidia" | "tesla" | "amd" | "intel"))) {
        words.remove(0);
    }
    words.join(" ")
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
    use crate::Catalog;

    #[test]
    fn printed_names_resolve() {
        let c = Catalog::builtin();
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
            ("NVIDIA GeForce RTX 4080 SUPER", "GeForce-RTX-4080-SUPER"),
            ("NVIDIA RTX A6000", "RTX-A6000"),
            ("RTXA6000", "RTX-A6000"),
            ("A6000", "RTX-A6000"),
        ] {
            assert_eq!(
                c.resolve(printed).map(|m| m.name.as_str()),
                Some(id),
                "{printed}"
            );
        }
    }

    #[test]
    fn unknown_names_are_not_guessed() {
        let c = Catalog::builtin();
        for printed in [
            "Some Other GPU",
            "NVIDIA A100",
            "H100",
            "NVIDIA GeForce RTX 5090",
            // Lambda's `RTX6000` is the Turing Quadro RTX 6000, not the RTX A6000.
            "RTX6000",
            "Quadro RTX 6000",
            "",
        ] {
            assert_eq!(
                c.resolve(printed).map(|g| g.name.clone()),
                None,
                "{printed}"
            );
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
