//! Files the tool writes appear whole or not at all: each is written to a temporary file beside
//! its target, flushed, synced and renamed over the target. A full disk, a kill or an error
//! half-way leaves the previous file as it was (and no temporary file behind).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};

fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A file being written: a temporary file beside `path` until [`Pending::commit`].
pub(crate) struct Pending {
    path: PathBuf,
    temp: tempfile::TempPath,
}

/// Start writing `path`: the file to write to, and what commits it.
pub(crate) fn create(path: &Path) -> anyhow::Result<(std::fs::File, Pending)> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gpuwise-").suffix(".tmp");
    // A temporary file is private (0600); the file it becomes is an ordinary one: 0666 less
    // the umask, as if created directly.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder
        .tempfile_in(dir_of(path))
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    let (file, temp) = tmp.into_parts();
    Ok((
        file,
        Pending {
            path: path.to_path_buf(),
            temp,
        },
    ))
}

impl Pending {
    /// Put the written file in place of the target (the caller has flushed it).
    pub(crate) fn commit(self) -> anyhow::Result<()> {
        let path = self.path;
        self.temp
            .persist(&path)
            .map_err(|e| anyhow!("cannot replace `{}`: {}", path.display(), e.error))
    }
}

/// Write `bytes` to `path` atomically, synced to disk before the rename.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let (mut file, pending) = create(path)?;
    let ctx = || format!("cannot write `{}`", path.display());
    file.write_all(bytes).with_context(ctx)?;
    file.flush().with_context(ctx)?;
    file.sync_all().with_context(ctx)?;
    drop(file);
    pending.commit()
}

/// Write `text` to `output` or stdout.
pub(crate) fn emit(text: &str, output: Option<&PathBuf>) -> anyhow::Result<()> {
    emit_with(output, |w| w.write_all(text.as_bytes()))
}

/// Let `write` write to `output` (atomically) or stdout, buffered, without holding the whole
/// text in memory (a JSON report of 100k devices is streamed).
pub(crate) fn emit_with(
    output: Option<&PathBuf>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    match output {
        Some(path) => {
            let (file, pending) = create(path)?;
            let ctx = || format!("cannot write `{}`", path.display());
            let mut w = std::io::BufWriter::with_capacity(1 << 16, file);
            write(&mut w).with_context(ctx)?;
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(ctx)?;
            file.sync_all().with_context(ctx)?;
            drop(file);
            pending.commit()?;
        }
        None => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            write(&mut out)?;
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("report.html");
        super::write(&p, b"old").expect("first");
        super::write(&p, b"new report").expect("second");
        assert_eq!(std::fs::read(&p).expect("read"), b"new report");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("report.html")]);
        #[cfg(unix)]
        {
            // The same mode as a file created directly (0666 less the umask), not 0600.
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &std::path::Path| {
                std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
            };
            let plain = dir.path().join("plain");
            std::fs::write(&plain, b"x").expect("write");
            assert_eq!(mode(&p), mode(&plain));
            std::fs::remove_file(&plain).expect("rm");
        }
        // A target whose folder does not exist: an error naming it, nothing written.
        let e = super::write(&dir.path().join("no/such/dir/r.html"), b"x").expect_err("no dir");
        assert!(e.to_string().contains("no/such/dir/r.html"), "{e}");
    }
}
