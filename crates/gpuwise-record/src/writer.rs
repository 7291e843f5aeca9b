//! A log file that survives crashes and rotates: `DIR/STEM.csv` is appended to; by size or age
//! it is renamed `DIR/STEM.csv-YYYYMMDDHHMMSS` (UTC) and compressed on a background thread to
//! `…YYYYMMDDHHMMSS.gz` (the logrotate `dateext` shape, which `gpuwise report` reads back under
//! the host `STEM`).
//!
//! Crash safety: [`Log::flush`] writes and `fsync`s, so a kill loses at most what came since
//! the last flush. Opening a log after a crash cuts a torn last line, starts a new file if the
//! old one has another header, and finishes compressions that were cut short (a rotated file
//! without its `.gz`; a half-written `.gz.tmp` is removed). A rename is followed by an `fsync`
//! of the directory, so the new name survives a power loss too.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// When to start a new file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Size in bytes after which the file is rotated.
    pub max_bytes: u64,
    /// Age in ms (since this run opened the file) after which it is rotated.
    pub max_age_ms: i64,
}

/// A write or rotation failed.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_owned(),
        source,
    }
}

/// What opening a log found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Bytes of a torn last line cut from the active file.
    pub torn_bytes: u64,
    /// Rotated files whose compression was finished.
    pub compressed: usize,
    /// The active file had another header and was rotated away.
    pub other_header: bool,
}

/// One rotating log.
pub struct Log {
    dir: PathBuf,
    stem: String,
    header: &'static str,
    rotation: Rotation,
    out: BufWriter<File>,
    bytes: u64,
    opened_ms: i64,
    compressing: Vec<JoinHandle<Result<(), WriteError>>>,
    rotated: usize,
}

impl Log {
    /// The active file's path.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.csv", self.stem))
    }

    /// Open (or create) `DIR/STEM.csv` for appending, repairing what a crash left.
    ///
    /// # Errors
    /// When the directory or file cannot be created, read or written.
    pub fn open(
        dir: &Path,
        stem: &str,
        header: &'static str,
        rotation: Rotation,
        now_ms: i64,
    ) -> Result<(Self, Recovered), WriteError> {
        std::fs::create_dir_all(dir).map_err(at(dir))?;
        let mut rec = Recovered {
            compressed: finish_compressions(dir, stem)?,
            ..Recovered::default()
        };
        let path = dir.join(format!("{stem}.csv"));
        let mut other_header = false;
        let mut bytes = 0;
        if path.exists() {
            rec.torn_bytes = cut_torn_line(&path)?;
            bytes = std::fs::metadata(&path).map_err(at(&path))?.len();
            if bytes > 0 && first_line(&path)? != header.as_bytes() {
                other_header = true;
            }
        }
        let mut log = Self {
            out: BufWriter::new(open_append(&path)?),
            dir: dir.to_owned(),
            stem: stem.to_owned(),
            header,
            rotation,
            bytes,
            opened_ms: now_ms,
            compressing: Vec::new(),
            rotated: 0,
        };
        if other_header {
            rec.other_header = true;
            log.rotate(now_ms)?;
        } else if bytes == 0 {
            log.write_header()?;
        }
        Ok((log, rec))
    }

    fn write_header(&mut self) -> Result<(), WriteError> {
        let path = self.path();
        self.out
            .write_all(self.header.as_bytes())
            .map_err(at(&path))?;
        self.bytes = self.header.len() as u64;
        Ok(())
    }

    /// Append rows (whole lines), rotating first when the file is due.
    ///
    /// # Errors
    /// When writing or rotating fails.
    pub fn append(&mut self, rows: &[u8], now_ms: i64) -> Result<(), WriteError> {
        if rows.is_empty() {
            return Ok(());
        }
        let has_rows = self.bytes > self.header.len() as u64;
        if has_rows
            && (self.bytes + rows.len() as u64 > self.rotation.max_bytes
                || now_ms - self.opened_ms >= self.rotation.max_age_ms)
        {
            self.rotate(now_ms)?;
        }
        let path = self.path();
        self.out.write_all(rows).map_err(at(&path))?;
        self.bytes += rows.len() as u64;
        Ok(())
    }

    /// Write what is buffered and `fsync` it.
    ///
    /// # Errors
    /// When the write or the sync fails (a full disk, say).
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let path = self.path();
        self.out.flush().map_err(at(&path))?;
        self.out.get_ref().sync_data().map_err(at(&path))
    }

    /// Close the active file under its rotated name and start a new one; the rotated file is
    /// compressed on a background thread.
    ///
    /// # Errors
    /// When the flush, rename or new file fails.
    pub fn rotate(&mut self, now_ms: i64) -> Result<(), WriteError> {
        self.flush()?;
        let path = self.path();
        let mut stamp_ms = now_ms;
        let rotated = loop {
            let name = format!("{}.csv-{}", self.stem, stamp(stamp_ms));
            let p = self.dir.join(&name);
            let gz = self.dir.join(format!("{name}.gz"));
            if !p.exists() && !gz.exists() {
                break p;
            }
            // Two rotations within a second: the next free second keeps names unique and
            // in order.
            stamp_ms += 1000;
        };
        std::fs::rename(&path, &rotated).map_err(at(&rotated))?;
        self.out = BufWriter::new(open_append(&path)?);
        sync_dir(&self.dir)?;
        self.bytes = 0;
        self.opened_ms = now_ms;
        self.rotated += 1;
        self.write_header()?;
        self.compressing.retain(|h| !h.is_finished());
        self.compressing
            .push(std::thread::spawn(move || compress(&rotated)));
        Ok(())
    }

    /// Flush, sync, and wait for compressions in flight. Returns the files rotated by this run.
    ///
    /// # Errors
    /// The first failure of the flush or of a compression.
    pub fn finish(mut self) -> Result<usize, WriteError> {
        self.flush()?;
        for h in self.compressing.drain(..) {
            match h.join() {
                Ok(r) => r?,
                Err(_) => {
                    return Err(WriteError {
                        path: self.dir.clone(),
                        source: std::io::Error::other("a compression thread panicked"),
                    });
                }
            }
        }
        Ok(self.rotated)
    }
}

/// `YYYYMMDDHHMMSS` in UTC.
fn stamp(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y%m%d%H%M%S")
        .to_string()
}

fn open_append(path: &Path) -> Result<File, WriteError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(at(path))
}

fn sync_dir(dir: &Path) -> Result<(), WriteError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
}

fn first_line(path: &Path) -> Result<Vec<u8>, WriteError> {
    let mut head = Vec::new();
    File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut head))
        .map_err(at(path))?;
    let end = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head.len(), |i| i + 1);
    head.truncate(end);
    Ok(head)
}

/// Cut a last line that has no newline (the process was killed while writing it). Returns the
/// bytes cut.
fn cut_torn_line(path: &Path) -> Result<u64, WriteError> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(at(path))?;
    let len = f.metadata().map_err(at(path))?.len();
    if len == 0 {
        return Ok(0);
    }
    // Look back a chunk at a time for the last newline.
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    let keep = loop {
        let start = end.saturating_sub(buf.len() as u64);
        let n = usize::try_from(end - start).unwrap_or(buf.len());
        f.seek(SeekFrom::Start(start)).map_err(at(path))?;
        f.read_exact(&mut buf[..n]).map_err(at(path))?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        if start == 0 {
            break 0;
        }
        end = start;
    };
    if keep < len {
        f.set_len(keep).map_err(at(path))?;
        f.sync_data().map_err(at(path))?;
    }
    Ok(len - keep)
}

/// Rotated files of `stem` left uncompressed by a crash: compress them; remove half-written
/// `.gz.tmp` files. Returns how many were compressed.
fn finish_compressions(dir: &Path, stem: &str) -> Result<usize, WriteError> {
    let prefix = format!("{stem}.csv-");
    let mut done = 0;
    for entry in std::fs::read_dir(dir).map_err(at(dir))? {
        let entry = entry.map_err(at(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        if rest.ends_with(".gz.tmp") {
            std::fs::remove_file(entry.path()).map_err(at(&entry.path()))?;
        } else if rest.len() == 14 && rest.bytes().all(|b| b.is_ascii_digit()) {
            compress(&entry.path())?;
            done += 1;
        }
    }
    Ok(done)
}

/// Gzip `path` to `path.gz` (through a `.gz.tmp` renamed when complete), then remove `path`.
fn compress(path: &Path) -> Result<(), WriteError> {
    let gz = PathBuf::from(format!("{}.gz", path.display()));
    let tmp = PathBuf::from(format!("{}.gz.tmp", path.display()));
    let mut input = File::open(path).map_err(at(path))?;
    let file = File::create(&tmp).map_err(at(&tmp))?;
    let mut enc =
        flate2::write::GzEncoder::new(BufWriter::new(file), flate2::Compression::default());
    std::io::copy(&mut input, &mut enc).map_err(at(&tmp))?;
    let file = enc
        .finish()
        .and_then(|w| w.into_inner().map_err(std::io::IntoInnerError::into_error))
        .map_err(at(&tmp))?;
    file.sync_all().map_err(at(&tmp))?;
    std::fs::rename(&tmp, &gz).map_err(at(&gz))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    std::fs::remove_file(path).map_err(at(path))
}
