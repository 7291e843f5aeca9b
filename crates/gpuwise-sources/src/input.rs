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
    /// Found by walking a directory (not named on the command line): a file there that is not
    /// telemetry is skipped with a warning rather than an error.
    pub found_in_dir: bool,
}

impl Input {
    /// Standard input.
    #[must_use]
    pub fn stdin() -> Self {
        Self {
            path: None,
            name: "-".to_owned(),
            found_in_dir: false,
        }
    }

    /// The host implied by the file name: its stem without compression, data and rotation
    /// extensions (`node-a.csv.gz`, `node-a.csv.1`, `node-a.csv-20260105.gz` and
    /// `node-a.csv.bak` → `node-a`); `stdin` for standard input.
    #[must_use]
    pub fn host_stem(&self) -> String {
        let Some(path) = &self.path else {
            return "stdin".to_owned();
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        host_of_file_name(&name)
    }
}

const DATA_EXTENSIONS: [&str; 11] = [
    ".gz", ".zst", ".zstd", ".dmon", ".csv", ".tsv", ".log", ".txt", ".prom", ".metrics", ".om",
];

/// See [`Input::host_stem`]. A rotation suffix (`.1`, `-20260105`, `.bak`, `~`) is cut only
/// where a data extension stands before it, so `10.0.0.1.csv` stays `10.0.0.1`.
#[must_use]
pub fn host_of_file_name(name: &str) -> String {
    let mut name = name.to_owned();
    loop {
        let lower = name.to_ascii_lowercase();
        if let Some(ext) = DATA_EXTENSIONS
            .iter()
            .find(|ext| lower.ends_with(*ext) && lower.len() > ext.len())
        {
            name.truncate(name.len() - ext.len());
            continue;
        }
        let rotation = rotation_suffix(&lower);
        if rotation > 0 {
            let rest = &lower[..lower.len() - rotation];
            if DATA_EXTENSIONS
                .iter()
                .any(|ext| rest.ends_with(*ext) && rest.len() > ext.len())
            {
                name.truncate(name.len() - rotation);
                continue;
            }
        }
        return name;
    }
}

/// The length of a log-rotation suffix at the end of `name`, 0 without one.
fn rotation_suffix(name: &str) -> usize {
    for tag in [".bak", ".old", ".orig", "~"] {
        if name.ends_with(tag) {
            return tag.len();
        }
    }
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let before = name
        .len()
        .checked_sub(digits + 1)
        .map(|i| name.as_bytes()[i]);
    match (digits, before) {
        (1..=3, Some(b'.')) | (8 | 10 | 14, Some(b'.' | b'-' | b'_')) => digits + 1,
        _ => 0,
    }
}

/// Expand command-line input specs: `-` is stdin; a directory is every regular, non-hidden file
/// below it (sorted; symbolic links followed, each directory entered once, so a link loop ends);
/// a spec with `*`, `?` or `[` is a glob; anything else must be a file. A file reached twice
/// (named twice, through a link, by a glob and a directory) is read once.
pub fn expand(specs: &[String]) -> Result<Vec<Input>, IngestError> {
    let mut out = Vec::new();
    let mut seen = Seen::default();
    for spec in specs {
        if spec == "-" {
            if !out.iter().any(|i: &Input| i.path.is_none()) {
                out.push(Input::stdin());
            }
            continue;
        }
        let path = Path::new(spec);
        if path.is_dir() {
            let mut found = 0;
            walk(path, &mut out, &mut seen, &mut found)?;
            if found == 0 {
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
            for p in found {
                if seen.first_time(&p) {
                    out.push(file_input(p, false));
                }
            }
        } else if path.is_file() {
            if seen.first_time(path) {
                out.push(file_input(path.to_path_buf(), false));
            }
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

/// Files and directories already reached, by device and inode (what a link or a second name
/// cannot disguise); by canonical path where there are no inodes.
#[derive(Default)]
struct Seen(std::collections::HashSet<FileId>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum FileId {
    #[cfg(unix)]
    Inode(u64, u64),
    Path(PathBuf),
}

impl Seen {
    fn first_time(&mut self, p: &Path) -> bool {
        self.0.insert(file_id(p))
    }
}

fn file_id(p: &Path) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(p) {
            return FileId::Inode(m.dev(), m.ino());
        }
    }
    FileId::Path(std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()))
}

fn file_input(path: PathBuf, found_in_dir: bool) -> Input {
    Input {
        name: path.display().to_string(),
        path: Some(path),
        found_in_dir,
    }
}

fn walk(
    dir: &Path,
    out: &mut Vec<Input>,
    seen: &mut Seen,
    found: &mut usize,
) -> Result<(), IngestError> {
    if !seen.first_time(dir) {
        return Ok(());
    }
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
            walk(&p, out, seen, found)?;
        } else if p.is_file() {
            *found += 1;
            if seen.first_time(&p) {
                out.push(file_input(p, true));
            }
        }
    }
    Ok(())
}

/// Open an input for reading, decompressing gzip or zstd (recognized by their magic bytes,
/// whatever the file is called).
pub fn open(input: &Input) -> Result<Box<dyn BufRead + Send>, IngestError> {
    open_noting(input).map(|(r, _)| r)
}

/// Set once a gzip input ended in bytes that are no gzip member (padding a copy tool or a
/// tape left): they were ignored, as `gzip -d` does, and the reader should say so.
pub type TrailingGarbage = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// The concatenated members of a gzip stream (as `MultiGzDecoder`), ending quietly at bytes
/// after a member that do not start another one instead of failing the whole input; those are
/// flagged in `trailing`. Hand-written because flate2's multi-member decoder errors there.
struct GzMembers<R: BufRead> {
    member: Option<flate2::bufread::GzDecoder<R>>,
    trailing: TrailingGarbage,
}

impl<R: BufRead> Read for GzMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(member) = self.member.as_mut() else {
                return Ok(0);
            };
            let n = member.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(member) = self.member.take() else {
                return Ok(0);
            };
            let mut rest = member.into_inner();
            let next = rest.fill_buf()?;
            if next.is_empty() {
                return Ok(0);
            }
            if next.starts_with(&[0x1f, 0x8b]) {
                self.member = Some(flate2::bufread::GzDecoder::new(rest));
            } else {
                self.trailing
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                return Ok(0);
            }
        }
    }
}

/// [`open`], and the flag a gzip input sets when it ends in bytes that are not gzip.
pub fn open_noting(
    input: &Input,
) -> Result<(Box<dyn BufRead + Send>, TrailingGarbage), IngestError> {
    let trailing = TrailingGarbage::default();
    let raw: Box<dyn Read + Send> = match &input.path {
        // The std file underneath: its reads fill the buffer as it is, where fs-err's wrapper
        // (no `read_buf`) has every fresh buffer zeroed first (a megabyte per file).
        Some(p) => Box::new(
            fs_err::File::open(p)
                .map_err(|source| IngestError::Io {
                    path: p.clone(),
                    source,
                })?
                .into_file(),
        ),
        None => Box::new(std::io::stdin()),
    };
    let mut buf = BufReader::with_capacity(1 << 20, raw);
    let err = |source| IngestError::Io {
        path: input.path.clone().unwrap_or_else(|| "-".into()),
        source,
    };
    let head = buf.fill_buf().map_err(err)?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let members = GzMembers {
            member: Some(flate2::bufread::GzDecoder::new(buf)),
            trailing: trailing.clone(),
        };
        return Ok((
            Box::new(BufReader::with_capacity(1 << 20, members)),
            trailing,
        ));
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let dec = zstd::stream::read::Decoder::with_buffer(buf).map_err(err)?;
        return Ok((Box::new(BufReader::with_capacity(1 << 20, dec)), trailing));
    }
    Ok((Box::new(buf), trailing))
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
        // `get`: a slice that would cut a multi-byte character is no stamp (never a panic).
        if b.len() >= start + 13
            && b[start + 10] == b'T'
            && let (Some(date), Some(rest)) = (name.get(start..start + 10), name.get(start + 11..))
        {
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
            let v: i64 = name.get(start..start + run)?.parse().ok()?;
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
            found_in_dir: false,
        };
        assert_eq!(i.host_stem(), "node-a");
        assert_eq!(host_of_file_name("gpu01.log"), "gpu01");
        assert_eq!(Input::stdin().host_stem(), "stdin");
        // Rotated and copied logs name the same host.
        for name in [
            "node.csv",
            "node.csv.1",
            "node.csv.12.gz",
            "node.csv-20260105",
            "node.csv-20260105.gz",
            "node.csv.bak",
            "node.csv~",
        ] {
            assert_eq!(host_of_file_name(name), "node", "{name}");
        }
        // A rotation-like ending that is part of the host stays.
        assert_eq!(host_of_file_name("10.0.0.1.csv"), "10.0.0.1");
        assert_eq!(host_of_file_name("gpu-node-2"), "gpu-node-2");
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
        // Non-ASCII before or inside where a stamp could be: no panic.
        assert_eq!(stamp_in_name("nœud-2026-01-05T10:00:00Z.prom"), Some(t));
        assert_eq!(stamp_in_name("ü2026-01-0ü5T10:00:00Z"), None);
        assert_eq!(stamp_in_name("日本語のファイルT1767607200.prom"), Some(t));
    }
}
