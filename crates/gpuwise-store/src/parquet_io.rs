//! One day partition as a Parquet file: the plain columns other engines read, and the state
//! column this crate joins. Written with the `parquet` crate's column writers (no Arrow: the
//! rows are ours, and the state is one opaque cell).

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::column::reader::ColumnReader;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;

use gpuwise_core::profile::{AccTotals, TilePiece};

use crate::{Edge, FORMAT, Fold, Row, StoreError, io};

/// What the state column holds: the piece and its edge.
#[derive(serde::Deserialize)]
struct Cell {
    piece: TilePiece,
    edge: Edge,
}

/// [`Cell`], borrowed for writing (the same encoding).
#[derive(serde::Serialize)]
struct CellRef<'a> {
    piece: &'a TilePiece,
    edge: Edge,
}

/// A row's plain totals: its piece's, and its edge's.
fn columns(r: &Row) -> AccTotals {
    let mut t = r.piece.acc.totals();
    let e = r.edge;
    let add = |v: u64, d: i64| {
        u64::try_from(i64::try_from(v).unwrap_or(i64::MAX).saturating_add(d)).unwrap_or(0)
    };
    t.covered_ms = add(t.covered_ms, e.covered_ms);
    t.util_ms = add(t.util_ms, e.util_ms);
    t.idle_ms = add(t.idle_ms, e.idle_ms);
    t.held_idle_ms = add(t.held_idle_ms, e.held_idle_ms);
    t.util_sum = u128::try_from(
        i128::try_from(t.util_sum)
            .unwrap_or(i128::MAX)
            .saturating_add(e.util_sum),
    )
    .unwrap_or(0);
    #[allow(clippy::cast_precision_loss)]
    {
        t.util_mean_pct = (t.util_ms > 0).then(|| t.util_sum as f64 / 100.0 / t.util_ms as f64);
    }
    t
}

/// The columns of a day file, in order, with their Parquet types (docs/store.md documents
/// each).
pub const COLUMNS: &[(&str, &str)] = &[
    (
        "tile_start",
        "REQUIRED INT64 tile_start (TIMESTAMP(MILLIS,true))",
    ),
    ("tile_ms", "REQUIRED INT64 tile_ms"),
    ("host", "REQUIRED BYTE_ARRAY host (UTF8)"),
    ("gpu", "REQUIRED BYTE_ARRAY gpu (UTF8)"),
    ("mig", "OPTIONAL BYTE_ARRAY mig (UTF8)"),
    ("model", "OPTIONAL BYTE_ARRAY model (UTF8)"),
    ("gpu_index", "OPTIONAL INT32 gpu_index"),
    ("samples", "REQUIRED INT64 samples"),
    ("covered_ms", "REQUIRED INT64 covered_ms"),
    ("util_ms", "REQUIRED INT64 util_ms"),
    ("util_mean_pct", "OPTIONAL DOUBLE util_mean_pct"),
    ("idle_ms", "REQUIRED INT64 idle_ms"),
    ("held_idle_ms", "REQUIRED INT64 held_idle_ms"),
    ("mem_peak_mib", "OPTIONAL DOUBLE mem_peak_mib"),
    ("mem_total_mib", "OPTIONAL DOUBLE mem_total_mib"),
    ("power_mean_w", "OPTIONAL DOUBLE power_mean_w"),
    ("state", "REQUIRED BYTE_ARRAY state"),
];

const STATE: usize = 16;
const TILE_START: usize = 0;
const TILE_MS: usize = 1;

fn broken(path: &Path, why: impl std::fmt::Display) -> StoreError {
    StoreError::Broken {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Optional values of one column: definition levels and the present values.
fn opt<T>(vals: impl Iterator<Item = Option<T>>) -> (Vec<i16>, Vec<T>) {
    let (mut def, mut out) = (Vec::new(), Vec::new());
    for v in vals {
        def.push(i16::from(v.is_some()));
        out.extend(v);
    }
    (def, out)
}

fn text(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

/// Write `rows` to `path` atomically (a sibling temporary file, synced, renamed over it, the
/// directory synced); returns the file's bytes.
pub(crate) fn write_atomic(path: &Path, rows: &[Row], fold: &Fold) -> Result<u64, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!(".part.parquet.{}.tmp", std::process::id()));
    let file = File::create(&tmp).map_err(io(&tmp))?;
    let written = encode(file, rows, fold).and_then(|mut f| {
        f.flush()?;
        f.sync_all()?;
        Ok(f.metadata()?.len())
    });
    let bytes = match written {
        Ok(b) => b,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(broken(path, format!("writing: {e}")));
        }
    };
    std::fs::rename(&tmp, path).map_err(io(path))?;
    // The rename itself is durable once the directory is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(bytes)
}

fn encode(file: File, rows: &[Row], fold: &Fold) -> Result<File, Box<dyn std::error::Error>> {
    let schema = Arc::new(parquet::schema::parser::parse_message_type(&format!(
        "message gpuwise_tile {{ {} }}",
        COLUMNS
            .iter()
            .map(|(_, t)| format!("{t};"))
            .collect::<Vec<_>>()
            .join(" ")
    ))?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(parquet::basic::ZstdLevel::try_new(3)?))
            .set_key_value_metadata(Some(vec![
                KeyValue::new("gpuwise.store".to_owned(), FORMAT.to_owned()),
                KeyValue::new("gpuwise.fold".to_owned(), serde_json::to_string(fold)?),
            ]))
            .build(),
    );
    let totals: Vec<_> = rows.iter().map(columns).collect();
    let mut w = SerializedFileWriter::new(file, schema, props)?;
    let mut rg = w.next_row_group()?;
    let mut i = 0;
    while let Some(mut col) = rg.next_column()? {
        macro_rules! req_i64 {
            ($f:expr) => {{
                let v: Vec<i64> = rows.iter().zip(&totals).map($f).collect();
                col.typed::<Int64Type>().write_batch(&v, None, None)?;
            }};
        }
        macro_rules! opt_f64 {
            ($f:expr) => {{
                let (def, v) = opt(totals.iter().map($f));
                col.typed::<DoubleType>()
                    .write_batch(&v, Some(&def), None)?;
            }};
        }
        match i {
            0 => req_i64!(|(r, _)| r.tile_start_ms),
            1 => req_i64!(|(r, _)| i64_of(r.tile_ms)),
            2 | 3 => {
                let v: Vec<ByteArray> = rows
                    .iter()
                    .map(|r| {
                        text(if i == 2 {
                            &r.piece.key.host
                        } else {
                            &r.piece.key.gpu
                        })
                    })
                    .collect();
                col.typed::<ByteArrayType>().write_batch(&v, None, None)?;
            }
            4 | 5 => {
                let (def, v) = opt(rows.iter().map(|r| {
                    if i == 4 {
                        r.piece.key.mig.as_deref().map(text)
                    } else {
                        r.piece.info.model_name.as_deref().map(text)
                    }
                }));
                col.typed::<ByteArrayType>()
                    .write_batch(&v, Some(&def), None)?;
            }
            6 => {
                let (def, v) = opt(rows.iter().map(|r| {
                    r.piece
                        .info
                        .index
                        .map(|x| i32::try_from(x).unwrap_or(i32::MAX))
                }));
                col.typed::<Int32Type>().write_batch(&v, Some(&def), None)?;
            }
            7 => req_i64!(|(_, t)| i64_of(t.samples)),
            8 => req_i64!(|(_, t)| i64_of(t.covered_ms)),
            9 => req_i64!(|(_, t)| i64_of(t.util_ms)),
            10 => opt_f64!(|t: &AccTotals| t.util_mean_pct),
            11 => req_i64!(|(_, t)| i64_of(t.idle_ms)),
            12 => req_i64!(|(_, t)| i64_of(t.held_idle_ms)),
            13 => opt_f64!(|t: &AccTotals| t.mem_peak_mib.map(f64::from)),
            14 => opt_f64!(|t: &AccTotals| t.mem_total_mib.map(f64::from)),
            15 => opt_f64!(|t: &AccTotals| t.power_mean_w),
            STATE => {
                let v: Vec<ByteArray> = rows
                    .iter()
                    .map(|r| {
                        postcard::to_stdvec(&CellRef {
                            piece: &r.piece,
                            edge: r.edge,
                        })
                        .map(ByteArray::from)
                    })
                    .collect::<Result<_, _>>()?;
                col.typed::<ByteArrayType>().write_batch(&v, None, None)?;
            }
            _ => return Err(format!("column {i} past the schema").into()),
        }
        col.close()?;
        i += 1;
    }
    rg.close()?;
    Ok(w.into_inner()?)
}

/// Every row of `path`; with `fold`, refused when the file was folded under other rules.
pub(crate) fn read(path: &Path, fold: Option<&Fold>) -> Result<Vec<Row>, StoreError> {
    let file = File::open(path).map_err(io(path))?;
    let reader = SerializedFileReader::new(file).map_err(|e| broken(path, e))?;
    let meta = reader.metadata().file_metadata();
    let kv = |k: &str| {
        meta.key_value_metadata()
            .and_then(|v| v.iter().find(|x| x.key == k))
            .and_then(|x| x.value.clone())
    };
    match kv("gpuwise.store") {
        Some(f) if f == FORMAT => {}
        Some(f) => {
            return Err(broken(
                path,
                format!("written as {f}; this gpuwise reads {FORMAT} (run `gpuwise rollup` again)"),
            ));
        }
        None => {
            return Err(broken(
                path,
                "not a gpuwise store file (no gpuwise.store key)",
            ));
        }
    }
    let stored: Fold = kv("gpuwise.fold")
        .and_then(|j| serde_json::from_str(&j).ok())
        .ok_or_else(|| broken(path, "no readable gpuwise.fold key"))?;
    if let Some(asked) = fold
        && *asked != stored
    {
        return Err(StoreError::OtherFold {
            path: path.to_path_buf(),
            stored: stored.words(),
            asked: asked.words(),
        });
    }
    let mut rows = Vec::new();
    for g in 0..reader.num_row_groups() {
        let rg = reader.get_row_group(g).map_err(|e| broken(path, e))?;
        let n = usize::try_from(rg.metadata().num_rows()).unwrap_or(0);
        let starts = read_i64(rg.get_column_reader(TILE_START), n, path)?;
        let lens = read_i64(rg.get_column_reader(TILE_MS), n, path)?;
        let states = read_bytes(rg.get_column_reader(STATE), n, path)?;
        if starts.len() != n || lens.len() != n || states.len() != n {
            return Err(broken(path, "columns of unequal length"));
        }
        for ((start, len), state) in starts.into_iter().zip(lens).zip(states) {
            let cell: Cell = postcard::from_bytes(state.data())
                .map_err(|e| broken(path, format!("a state cell: {e}")))?;
            let tile_ms = u64::try_from(len).unwrap_or(0);
            if !crate::plausible(&cell.piece, tile_ms) {
                return Err(broken(
                    path,
                    format!(
                        "the state cell of {} at {start} does not hold together (damaged?)",
                        cell.piece.key
                    ),
                ));
            }
            rows.push(Row {
                tile_start_ms: start,
                tile_ms: u64::try_from(len).map_err(|_| broken(path, "a negative tile_ms"))?,
                piece: cell.piece,
                edge: cell.edge,
            });
        }
    }
    Ok(rows)
}

/// Every value of a required column of `T` in a row group of `n` rows.
fn read_column<T: parquet::data_type::DataType>(
    mut r: parquet::column::reader::ColumnReaderImpl<T>,
    n: usize,
    path: &Path,
) -> Result<Vec<T::T>, StoreError> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let (records, _, _) = r
            .read_records(n - v.len(), None, None, &mut v)
            .map_err(|e| broken(path, e))?;
        if records == 0 {
            break;
        }
    }
    Ok(v)
}

fn read_i64(
    col: parquet::errors::Result<ColumnReader>,
    n: usize,
    path: &Path,
) -> Result<Vec<i64>, StoreError> {
    match col {
        Ok(ColumnReader::Int64ColumnReader(r)) => read_column(r, n, path),
        _ => Err(broken(path, "an INT64 column of another type")),
    }
}

fn read_bytes(
    col: parquet::errors::Result<ColumnReader>,
    n: usize,
    path: &Path,
) -> Result<Vec<ByteArray>, StoreError> {
    match col {
        Ok(ColumnReader::ByteArrayColumnReader(r)) => read_column(r, n, path),
        _ => Err(broken(path, "a BYTE_ARRAY column of another type")),
    }
}
