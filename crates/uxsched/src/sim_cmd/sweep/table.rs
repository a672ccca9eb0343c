//! The tidy table (`OUT/results.csv`, `OUT/results.parquet`): one row per point × task × metric,
//! with the point's settings, its param values (empty where the param does not apply) and the
//! run's digest. Written from the journal in point order, so it is the same for any `--jobs`.

use super::grid::{Grid, Point};
use anyhow::Context;
use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use uxsched_simrun::Outcome;

pub const CSV: &str = "results.csv";
pub const PARQUET: &str = "results.parquet";

/// Rows per Parquet row group (bounds the writer's memory whatever the sweep's size).
const ROW_GROUP: usize = 1 << 18;

/// The fixed columns before the params, and after them.
const HEAD: [&str; 9] = [
    "point",
    "point_id",
    "workload",
    "sched",
    "mechs",
    "cpus",
    "hz",
    "seed",
    "duration_ns",
];
const TAIL: [&str; 5] = ["digest", "scope", "name", "metric", "value"];

/// One cell: the table's three kinds.
#[derive(Clone)]
enum Cell {
    Int(i64),
    Text(String),
    /// A param that does not apply to the point.
    Null,
    Float(f64),
}

/// A row of the table as cells in column order.
fn cells(grid: &Grid, p: &Point, o: &Outcome) -> Vec<Vec<Cell>> {
    let head = [
        Cell::Int(p.index as i64),
        Cell::Text(p.id.clone()),
        Cell::Text(grid.workloads[p.workload].clone()),
        Cell::Text(p.sched.clone()),
        Cell::Text(p.mechs.join("+")),
        Cell::Int(o.cpus as i64),
        Cell::Int(i64::from(p.hz)),
        Cell::Int(p.seed as i64),
        Cell::Int(o.duration_ns as i64),
    ];
    o.rows
        .iter()
        .map(|r| {
            let mut c: Vec<Cell> = head.to_vec();
            for k in &grid.param_keys {
                c.push(match p.params.iter().find(|(pk, _)| pk == k) {
                    Some((_, v)) => Cell::Text(v.clone()),
                    None => Cell::Null,
                });
            }
            c.extend([
                Cell::Text(o.digest.clone()),
                Cell::Text(r.scope.clone()),
                Cell::Text(r.name.clone()),
                Cell::Text(r.metric.clone()),
                Cell::Float(r.value),
            ]);
            c
        })
        .collect()
}

impl Cell {
    fn csv(&self) -> String {
        match self {
            Cell::Int(i) => i.to_string(),
            Cell::Text(s) => s.clone(),
            Cell::Null => String::new(),
            Cell::Float(f) => f.to_string(),
        }
    }
}

/// The column names, in order.
pub fn columns(grid: &Grid) -> Vec<String> {
    HEAD.iter()
        .map(|s| s.to_string())
        .chain(grid.param_keys.iter().cloned())
        .chain(TAIL.iter().map(|s| s.to_string()))
        .collect()
}

/// Writes both files from `outcomes` (in point order); returns the number of rows.
pub fn write(
    dir: &Path,
    grid: &Grid,
    outcomes: impl Iterator<Item = anyhow::Result<Outcome>>,
) -> anyhow::Result<u64> {
    let names = columns(grid);
    let csv_path = dir.join(CSV);
    let mut csv = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("creating {}", csv_path.display()))?;
    csv.write_record(&names)?;
    let pq_path = dir.join(PARQUET);
    let mut pq = ParquetTable::create(&pq_path, grid, &names)?;
    let mut rows = 0;
    for o in outcomes {
        let o = o?;
        let p = &grid.points[o.index];
        for row in cells(grid, p, &o) {
            csv.write_record(row.iter().map(Cell::csv))?;
            pq.push(row)?;
            rows += 1;
        }
    }
    csv.flush()?;
    pq.finish()
        .with_context(|| format!("writing {}", pq_path.display()))?;
    Ok(rows)
}

/// The Parquet file, one column buffer per column, flushed as a row group every [`ROW_GROUP`].
struct ParquetTable {
    writer: SerializedFileWriter<File>,
    columns: Vec<Vec<Cell>>,
}

impl ParquetTable {
    fn create(path: &Path, grid: &Grid, names: &[String]) -> anyhow::Result<ParquetTable> {
        let params = HEAD.len()..HEAD.len() + grid.param_keys.len();
        let fields: Vec<TypePtr> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let b = if [0, 5, 6, 7, 8].contains(&i) {
                    Type::primitive_type_builder(n, PhysicalType::INT64)
                } else if i == names.len() - 1 {
                    Type::primitive_type_builder(n, PhysicalType::DOUBLE)
                } else {
                    Type::primitive_type_builder(n, PhysicalType::BYTE_ARRAY)
                        .with_logical_type(Some(LogicalType::String))
                };
                let rep = if params.contains(&i) {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                };
                b.with_repetition(rep).build().map(Arc::new)
            })
            .collect::<Result<_, _>>()?;
        let schema = Type::group_type_builder("sweep")
            .with_fields(fields)
            .build()?;
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let props = Arc::new(WriterProperties::builder().build());
        Ok(ParquetTable {
            writer: SerializedFileWriter::new(file, Arc::new(schema), props)?,
            columns: names.iter().map(|_| Vec::new()).collect(),
        })
    }

    fn push(&mut self, row: Vec<Cell>) -> anyhow::Result<()> {
        for (col, cell) in self.columns.iter_mut().zip(row) {
            col.push(cell);
        }
        if self.columns[0].len() >= ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if self.columns[0].is_empty() {
            return Ok(());
        }
        let mut rg = self.writer.next_row_group()?;
        for col in &mut self.columns {
            let cells = std::mem::take(col);
            let mut w = rg
                .next_column()?
                .context("the schema has fewer columns than the table")?;
            write_column(&mut w, cells)?;
            w.close()?;
        }
        rg.close()?;
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.flush()?;
        self.writer.close()?;
        Ok(())
    }
}

/// One column chunk; the column's kind is its first cell's (a param column mixes text and null).
fn write_column(
    w: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    cells: Vec<Cell>,
) -> anyhow::Result<()> {
    match cells.first() {
        Some(Cell::Int(_)) => {
            let v: Vec<i64> = cells
                .iter()
                .map(|c| if let Cell::Int(i) = c { *i } else { 0 })
                .collect();
            w.typed::<Int64Type>().write_batch(&v, None, None)?;
        }
        Some(Cell::Float(_)) => {
            let v: Vec<f64> = cells
                .iter()
                .map(|c| if let Cell::Float(f) = c { *f } else { f64::NAN })
                .collect();
            w.typed::<DoubleType>().write_batch(&v, None, None)?;
        }
        _ => {
            let optional = w.typed::<ByteArrayType>().get_descriptor().max_def_level() > 0;
            let defs: Vec<i16> = cells
                .iter()
                .map(|c| i16::from(!matches!(c, Cell::Null)))
                .collect();
            let v: Vec<ByteArray> = cells
                .into_iter()
                .filter_map(|c| match c {
                    Cell::Text(s) => Some(ByteArray::from(s.into_bytes())),
                    _ => None,
                })
                .collect();
            w.typed::<ByteArrayType>()
                .write_batch(&v, optional.then_some(&defs[..]), None)?;
        }
    }
    Ok(())
}
