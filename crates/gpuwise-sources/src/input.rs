//! Inputs: paths, directories, globs and `-` (stdin); transparent gzip and zstd.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::diag::IngestError;

/// One input to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The file, `None` for stdin.
    pub path: Option<PathBuf>,
    /// How messages name it.
    pub name: String,
}

impl Input {
    /// Standard input.
    #[must_use]
    pub fn stdin() -> Self {
        Self {
            path: None,
            name: "-".to_owned(),
        }
    }

    /// The host implied by the file name: its stem without compression and data extensions
    /// (`node-a.csv.gz` → `node-a`); `stdin` for standard input.
    #[must_use]
    pub fn host_stem(&self) -> String {
        let Some(path) = &self.path else {
            return "stdin".to_owned();
        };
        let mut name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        loop {
            let lower = name.to_ascii_lowercase();
            let cut = [
                ".gz", ".zst", ".zstd", ".dmon", ".csv", ".tsv", ".log", ".txt", ".prom",
                ".metrics", ".om",
            ]
            .iter()
            .find(|ext| lower.ends_with(*ext) && lower.len() > ext.len());
            match cut {
                Some(ext) => name.truncate(name.len() - ext.len()),
                None => break,
            }
        }
        name
    }
}

/// Expand command-line input specs: `-` is stdin; a directory is every regular, non-hidden file
/// below it (sorted); a spec with `*`, `?` or `[` is a glob; anything else must be a file.
pub fn expand(specs: &[String]) -> Result<Vec<Input>, IngestError> {
    let mut out = Vec::new();
    for spec in specs {
        if spec == "-" {
            out.push(Input::stdin());
            continue;
        }
        let path = Path::new(spec);
        if path.is_dir() {
            let before = out.len();
            walk(path, &mut out)?;
            if out.len() == before {
                return Err(IngestError::NoMatch(spec.clone()));
            }
        } else if spec.contains(['*', '?', '[']) {
            let paths = glob::glob(spec)
                .map_err(|e| IngestError::Usage(format!("`{spec}` is not a valid glob: {e}")))?;
            let mut found: Vec<PathBuf> = paths
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect();
            if found.is_empty() {
                return Err(IngestError::NoMatch(spec.clone()));
            }
            found.sort();
            out.extend(found.into_iter().map(file_input));
        } else if path.is_file() {
            out.push(file_input(path.to_path_buf()));
        } else {
            return Err(IngestError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file or directory",
                ),
            });
        }
    }
    Ok(out)
}

fn file_input(path: PathBuf) -> Input {
    Input {
        name: path.display().to_string(),
        path: Some(path),
    }
}

fn walk(dir: &Path, out: &mut Vec<Input>) -> Result<(), IngestError> {
    let io = |source| IngestError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = fs_err::read_dir(dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.is_file() {
            out.push(file_input(p));
        }
    }
    Ok(())
}

/// Open an input for reading, decompressing gzip or zstd (recognized by their magic bytes,
/// whatever the file is called).
pub fn open(input: &Input) -> Result<Box<dyn BufRead + Send>, IngestError> {
    let raw: Box<dyn Read + Send> = match &input.path {
        Some(p) => Box::new(fs_err::File::open(p).map_err(|source| IngestError::Io {
            path: p.clone(),
            source,
        })?),
        None => Box::new(std::io::stdin()),
    };
    let mut buf = BufReader::with_capacity(1 << 20, raw);
    let err = |source| IngestError::Io {
        path: input.path.clone().unwrap_or_else(|| "-".into()),
        source,
    };
    let head = buf.fill_buf().map_err(err)?;
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(buf),
        )));
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let dec = zstd::stream::read::Decoder::with_buffer(buf).map_err(err)?;
        return Ok(Box::new(BufReader::with_capacity(1 << 20, dec)));
    }
    Ok(Box::new(buf))
}

/// The time a scrape file without timestamps was taken: an RFC 3339 stamp in its name
/// (`dcgm-2026-01-05T10:00:00Z.prom`, also with `-` or nothing between time fields), or an epoch
/// in seconds (10 digits) or milliseconds (13 digits) in its name; else its modification time.
#[must_use]
pub fn file_time_ms(input: &Input) -> Option<i64> {
    let path = input.path.as_ref()?;
    let name = path.file_name()?.to_string_lossy().into_owned();
    stamp_in_name(&name).or_else(|| {
        let modified = fs_err::metadata(path).ok()?.modified().ok()?;
        let d = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        i64::try_from(d.as_millis()).ok()
    })
}

/// An RFC 3339 or epoch stamp inside a file name.
#[must_use]
pub fn stamp_in_name(name: &str) -> Option<i64> {
    let b = name.as_bytes();
    for start in 0..b.len() {
        if start > 0 && b[start - 1].is_ascii_digit() {
            continue;
        }
        // YYYY-MM-DDTHH:MM:SS or HH-MM-SS or HHMMSS, optional .fff, optional Z/offset.
        if b.len() >= start + 13 && b[start + 10] == b'T' {
            let date = &name[start..start + 10];
            let rest = &name[start + 11..];
            let time: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ':' || *c == '-')
                .collect();
            let digits: String = time.chars().filter(char::is_ascii_digit).collect();
            if digits.len() >= 6 {
                // Stamps in file names are read as UTC (what `date -u` writes).
                let text = format!(
                    "{date}T{}:{}:{}Z",
                    &digits[0..2],
                    &digits[2..4],
                    &digits[4..6]
                );
                if let Ok(ts) = text.parse::<jiff::Timestamp>() {
                    return Some(ts.as_millisecond());
                }
            }
        }
        let run: usize = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run == 10 || run == 13 {
            let v: i64 = name[start..start + run].parse().ok()?;
            return Some(if run == 10 { v * 1000 } else { v });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_from_file_name() {
        let i = Input {
            path: Some("/x/node-a.csv.gz".into()),
            name: String::new(),
        };
        assert_eq!(i.host_stem(), "node-a");
        let i = Input {
            path: Some("gpu01.log".into()),
            name: String::new(),
        };
        assert_eq!(i.host_stem(), "gpu01");
        assert_eq!(Input::stdin().host_stem(), "stdin");
    }

    #[test]
    fn stamps_in_names() {
        let t = 1_767_607_200_000; // 2026-01-05T10:00:00Z
        assert_eq!(stamp_in_name("dcgm-2026-01-05T10:00:00Z.prom"), Some(t));
        assert_eq!(stamp_in_name("dcgm-2026-01-05T10-00-00Z.prom"), Some(t));
        assert_eq!(stamp_in_name("scrape_2026-01-05T100000.prom"), Some(t));
        assert_eq!(stamp_in_name("node-1767607200.prom"), Some(t));
        assert_eq!(stamp_in_name("node-1767607200000.prom"), Some(t));
        assert_eq!(stamp_in_name("node-a.prom"), None);
    }
}
