//! Files the tool writes appear whole or not at all: each is written to a temporary file beside
//! its target, flushed, synced and renamed over the target. A full disk, a kill or an error
//! half-way leaves the previous file as it was (and no temporary file behind). A target that
//! is not a file — `/dev/null`, a named pipe, `/dev/stdout` — is written directly: renaming a
//! file over it would replace the device (as root, `-o /dev/null` made `/dev/null` a file). A
//! symbolic link is followed: the file it names is replaced, the link kept.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};

fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A file being written: a temporary file beside `path` until [`Pending::commit`], or a
/// target that is not a file, written in place.
pub(crate) enum Pending {
    /// Renamed over `path` when committed.
    Atomic {
        path: PathBuf,
        temp: tempfile::TempPath,
    },
    /// A device, pipe or socket, written directly.
    Direct,
}

/// Start writing `path`: the file to write to, and what commits it.
pub(crate) fn create(path: &Path) -> anyhow::Result<(std::fs::File, Pending)> {
    let cannot = || format!("cannot write `{}`", path.display());
    // `metadata` follows links: what the path finally names.
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
        && !m.is_dir()
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(cannot)?;
        return Ok((file, Pending::Direct));
    }
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).with_context(cannot)?,
        _ => path.to_path_buf(),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gpuwise-").suffix(".tmp");
    // A temporary file is private (0600); the file it becomes is an ordinary one: 0666 less
    // the umask, as if created directly.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir_of(&target)).with_context(cannot)?;
    let (file, temp) = tmp.into_parts();
    Ok((file, Pending::Atomic { path: target, temp }))
}

impl Pending {
    /// Sync `file` to disk (a file about to be renamed in place; a device is not synced).
    pub(crate) fn sync(&self, file: &std::fs::File) -> std::io::Result<()> {
        match self {
            Pending::Atomic { .. } => file.sync_all(),
            Pending::Direct => Ok(()),
        }
    }

    /// Put the written file in place of the target (the caller has flushed it).
    pub(crate) fn commit(self) -> anyhow::Result<()> {
        match self {
            Pending::Atomic { path, temp } => temp
                .persist(&path)
                .map(|_| ())
                .map_err(|e| anyhow!("cannot replace `{}`: {}", path.display(), e.error)),
            Pending::Direct => Ok(()),
        }
    }
}

/// Write `bytes` to `path` atomically, synced to disk before the rename.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let (mut file, pending) = create(path)?;
    let ctx = || format!("cannot write `{}`", path.display());
    file.write_all(bytes).with_context(ctx)?;
    file.flush().with_context(ctx)?;
    pending.sync(&file).with_context(ctx)?;
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
            pending.sync(&file).with_context(ctx)?;
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
        // A link is followed: the file it names is replaced, the link stays a link.
        #[cfg(unix)]
        {
            let link = dir.path().join("latest.html");
            std::os::unix::fs::symlink(&p, &link).expect("link");
            super::write(&link, b"through the link").expect("through the link");
            assert!(
                std::fs::symlink_metadata(&link)
                    .expect("meta")
                    .file_type()
                    .is_symlink()
            );
            assert_eq!(std::fs::read(&p).expect("read"), b"through the link");
        }
        // A target whose folder does not exist: an error naming it, nothing written.
        let e = super::write(&dir.path().join("no/such/dir/r.html"), b"x").expect_err("no dir");
        assert!(e.to_string().contains("no/such/dir/r.html"), "{e}");
    }

    /// A target that is not a file is written in place, never replaced: a named pipe stays a
    /// pipe (as `/dev/null` stays a device).
    #[test]
    #[cfg(unix)]
    fn a_pipe_is_written_not_replaced() {
        use std::io::Read;
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(
            made.is_ok_and(|s| s.success()),
            "mkfifo (coreutils) makes a pipe"
        );
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut got = String::new();
                std::fs::File::open(&fifo)
                    .expect("open")
                    .read_to_string(&mut got)
                    .expect("read");
                got
            })
        };
        super::write(&fifo, b"through the pipe").expect("write");
        assert_eq!(reader.join().expect("reader"), "through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::metadata(&fifo)
                .expect("meta")
                .file_type()
                .is_fifo()
        );
    }
}
