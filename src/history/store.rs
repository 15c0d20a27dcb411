//! The history store: one SQLite file (rusqlite, SQLite built in). Runs
//! and their figures are rows, written in one transaction each, so a
//! process killed mid-write leaves the store as it was before that run.
//! WAL journal and a busy timeout let two watchers (or a watch and a
//! `linerate run`) share the file; a store that stays locked past the
//! timeout, or a damaged file, is an error that names the file, and the
//! run it could not take is spooled beside it (`<store>.pending/`) and
//! recorded by the next process that opens the store: no run is lost.

use rusqlite::ffi::ErrorCode;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::entry::{Entry, Environment, Figure, RunKind};
use super::HistoryError;

/// The schema's version (SQLite's `user_version`).
const SCHEMA_VERSION: i64 = 1;

/// How long a write waits for another process's transaction.
const BUSY: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    series TEXT NOT NULL,
    spec TEXT NOT NULL,
    target TEXT NOT NULL,
    lab TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    environment TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    results TEXT,
    watch TEXT,
    command TEXT NOT NULL,
    recorded TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_series ON runs (series, at, id);
CREATE UNIQUE INDEX IF NOT EXISTS runs_results ON runs (results) WHERE results IS NOT NULL;
CREATE TABLE IF NOT EXISTS figures (
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    point TEXT NOT NULL,
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run, point, metric)
);
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY,
    series TEXT NOT NULL,
    point TEXT NOT NULL,
    metric TEXT NOT NULL,
    run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    found_at INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    before REAL NOT NULL,
    after REAL NOT NULL,
    p REAL NOT NULL,
    UNIQUE (series, point, metric, run)
);
";

/// A stored run (without its figures).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub id: i64,
    pub at: String,
    pub kind: RunKind,
    pub name: String,
    pub series: String,
    pub target: String,
    pub lab: String,
    pub fingerprint: String,
    pub status: String,
    pub error: Option<String>,
    pub results: Option<String>,
    pub watch: Option<String>,
    pub command: String,
}

/// A stored change point: `metric` of `point` in `series` moved from
/// `before` to `after` at run `run`, found when run `found_at` ended.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StoredChange {
    pub series: String,
    pub point: String,
    pub metric: String,
    pub run: i64,
    pub found_at: i64,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

/// Which runs `Store::runs` lists.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub name: Option<String>,
    pub series: Option<String>,
    pub watch: Option<String>,
    pub status: Option<String>,
    /// RFC 3339 (or a prefix of one): runs at or after it.
    pub since: Option<String>,
    /// The newest this many (0: all).
    pub limit: usize,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// The spool of runs a store could not take: `<store>.pending/`.
pub fn pending_dir(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pending");
    PathBuf::from(name)
}

/// Keeps `e` beside the store at `path` for the next process that opens
/// it; returns where.
pub fn spool(path: &Path, e: &Entry) -> Result<PathBuf, HistoryError> {
    let dir = pending_dir(path);
    let io = |source| HistoryError::Io {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let stamp: String = e.at.chars().filter(char::is_ascii_alphanumeric).collect();
    let file = dir.join(format!("{stamp}-{}.json", std::process::id()));
    let tmp = file.with_extension("tmp");
    let text = serde_json::to_string(e).map_err(|e| HistoryError::Io {
        path: file.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &file))
        .map_err(io)?;
    Ok(file)
}

impl Store {
    /// Opens (creating) the store at `path`, checks it, and records any
    /// spooled runs.
    pub fn open(path: &Path) -> Result<Store, HistoryError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Io {
                path: dir.into(),
                source,
            })?;
        }
        let sql = |e| HistoryError::of_sql(path, e);
        let conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(BUSY).map_err(sql)?;
        let mut s = Store {
            conn,
            path: path.into(),
        };
        s.check()?;
        s.setup()?;
        s.drain()?;
        Ok(s)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, e: rusqlite::Error) -> HistoryError {
        HistoryError::of_sql(&self.path, e)
    }

    /// A damaged file (truncated, or not SQLite) is said before anything
    /// is written to it.
    fn check(&self) -> Result<(), HistoryError> {
        let verdict: String = self
            .conn
            .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        if verdict != "ok" {
            return Err(HistoryError::Damaged {
                path: self.path.clone(),
                why: verdict,
            });
        }
        Ok(())
    }

    fn setup(&mut self) -> Result<(), HistoryError> {
        self.wal()?;
        let c = &self.conn;
        c.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
            .map_err(|e| self.sql(e))?;
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        if version > SCHEMA_VERSION {
            return Err(HistoryError::Newer {
                path: self.path.clone(),
                version,
            });
        }
        if version < SCHEMA_VERSION {
            let path = self.path.clone();
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| HistoryError::of_sql(&path, e))?;
            tx.execute_batch(SCHEMA)
                .and_then(|_| tx.pragma_update(None, "user_version", SCHEMA_VERSION))
                .and_then(|_| tx.commit())
                .map_err(|e| HistoryError::of_sql(&self.path, e))?;
        }
        Ok(())
    }

    /// WAL: readers do not block the writer, nor it them. Switching a new
    /// file to it needs the file to itself, and SQLite answers busy at
    /// once rather than wait: two watchers starting on a new store try
    /// again until BUSY is up.
    fn wal(&self) -> Result<(), HistoryError> {
        let deadline = std::time::Instant::now() + BUSY;
        loop {
            let mode = self
                .conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
            match mode {
                Ok(m) if m.eq_ignore_ascii_case("wal") => return Ok(()),
                Ok(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e)
                    if std::time::Instant::now() < deadline
                        && matches!(
                            e.sqlite_error_code(),
                            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                        ) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(m) => {
                    return Err(HistoryError::Sql {
                        path: self.path.clone(),
                        why: format!("cannot use a WAL journal (the file stays in {m} mode)"),
                    })
                }
                Err(e) => return Err(self.sql(e)),
            }
        }
    }

    /// Records the runs other processes spooled, oldest first.
    fn drain(&mut self) -> Result<(), HistoryError> {
        let dir = pending_dir(&self.path);
        let Ok(read) = std::fs::read_dir(&dir) else {
            return Ok(());
        };
        let mut files: Vec<PathBuf> = read
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            // A spool file that is not an entry is left for a person.
            let Ok(e) = serde_json::from_str::<Entry>(&text) else {
                continue;
            };
            self.record(&e)?;
            let _ = std::fs::remove_file(&f);
        }
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }

    /// Records `e` in one transaction; a run of the same results folder
    /// (a resumed study, an import done twice) replaces the one stored.
    pub fn record(&mut self, e: &Entry) -> Result<i64, HistoryError> {
        let path = self.path.clone();
        let sql = |err| HistoryError::of_sql(&path, err);
        // Immediate: the write lock is taken (waiting as long as BUSY) at
        // the start, never upgraded from a read, which SQLite refuses at
        // once when another process wrote in between.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let old: Option<i64> = match &e.results {
            Some(r) => tx
                .query_row("SELECT id FROM runs WHERE results = ?1", [r], |row| {
                    row.get(0)
                })
                .optional()
                .map_err(sql)?,
            None => None,
        };
        let environment = serde_json::to_string(&e.environment).unwrap_or_default();
        let values = params![
            e.at,
            e.kind.word(),
            e.name,
            e.series(),
            e.spec,
            e.target,
            e.lab,
            e.environment.fingerprint(),
            environment,
            e.status,
            e.error,
            e.results,
            e.watch,
            e.command,
            crate::units::rfc3339_now(),
        ];
        let id = match old {
            Some(id) => {
                tx.execute(
                    "UPDATE runs SET at=?1, kind=?2, name=?3, series=?4, spec=?5, target=?6,
                     lab=?7, fingerprint=?8, environment=?9, status=?10, error=?11, results=?12,
                     watch=COALESCE(?13, watch), command=?14, recorded=?15 WHERE id=?16",
                    rusqlite::params_from_iter(
                        values.iter().copied().chain([&id as &dyn rusqlite::ToSql]),
                    ),
                )
                .map_err(sql)?;
                tx.execute("DELETE FROM figures WHERE run = ?1", [id])
                    .map_err(sql)?;
                id
            }
            None => {
                tx.execute(
                    "INSERT INTO runs (at, kind, name, series, spec, target, lab, fingerprint,
                     environment, status, error, results, watch, command, recorded)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                    values,
                )
                .map_err(sql)?;
                tx.last_insert_rowid()
            }
        };
        {
            let mut ins = tx
                .prepare("INSERT INTO figures (run, point, metric, value) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql)?;
            for f in &e.figures {
                ins.execute(params![id, f.point, f.metric, f.value])
                    .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        Ok(id)
    }

    fn run_of(row: &rusqlite::Row) -> rusqlite::Result<Run> {
        let kind: String = row.get(2)?;
        Ok(Run {
            id: row.get(0)?,
            at: row.get(1)?,
            kind: RunKind::parse(&kind).unwrap_or(RunKind::Run),
            name: row.get(3)?,
            series: row.get(4)?,
            target: row.get(5)?,
            lab: row.get(6)?,
            fingerprint: row.get(7)?,
            status: row.get(8)?,
            error: row.get(9)?,
            results: row.get(10)?,
            watch: row.get(11)?,
            command: row.get(12)?,
        })
    }

    const RUN_COLUMNS: &'static str =
        "id, at, kind, name, series, target, lab, fingerprint, status, error, results, watch, command";

    /// The runs `f` selects, oldest first.
    pub fn runs(&self, f: &Filter) -> Result<Vec<Run>, HistoryError> {
        let mut q = format!("SELECT {} FROM runs WHERE 1=1", Self::RUN_COLUMNS);
        let mut args: Vec<String> = Vec::new();
        for (col, op, v) in [
            ("name", "=", &f.name),
            (
                "series",
                "LIKE",
                &f.series.as_ref().map(|s| format!("{s}%")),
            ),
            ("watch", "=", &f.watch),
            ("status", "=", &f.status),
            ("at", ">=", &f.since),
        ] {
            if let Some(v) = v {
                args.push(v.clone());
                q.push_str(&format!(" AND {col} {op} ?{}", args.len()));
            }
        }
        q.push_str(" ORDER BY at DESC, id DESC");
        if f.limit > 0 {
            q.push_str(&format!(" LIMIT {}", f.limit));
        }
        let mut st = self.conn.prepare(&q).map_err(|e| self.sql(e))?;
        let mut runs = st
            .query_map(rusqlite::params_from_iter(args.iter()), Self::run_of)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<Run>>>())
            .map_err(|e| self.sql(e))?;
        runs.reverse();
        Ok(runs)
    }

    pub fn run(&self, id: i64) -> Result<Option<Run>, HistoryError> {
        let q = format!("SELECT {} FROM runs WHERE id = ?1", Self::RUN_COLUMNS);
        self.conn
            .query_row(&q, [id], Self::run_of)
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// A run's spec and environment, as recorded.
    pub fn details(&self, id: i64) -> Result<(String, Environment), HistoryError> {
        let (spec, env): (String, String) = self
            .conn
            .query_row(
                "SELECT spec, environment FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.sql(e))?;
        Ok((spec, serde_json::from_str(&env).unwrap_or_default()))
    }

    pub fn figures(&self, run: i64) -> Result<Vec<Figure>, HistoryError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT point, metric, value FROM figures WHERE run = ?1 ORDER BY point, metric",
            )
            .map_err(|e| self.sql(e))?;
        st.query_map([run], |r| {
            Ok(Figure {
                point: r.get(0)?,
                metric: r.get(1)?,
                value: r.get(2)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    /// One metric of one point over a series' runs that measured it (ok
    /// or partial), oldest first: (run id, value).
    pub fn values(
        &self,
        series: &str,
        point: &str,
        metric: &str,
    ) -> Result<Vec<(i64, f64)>, HistoryError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT r.id, f.value FROM runs r JOIN figures f ON f.run = r.id
                 WHERE r.series = ?1 AND f.point = ?2 AND f.metric = ?3 AND r.status != 'failed'
                 ORDER BY r.at, r.id",
            )
            .map_err(|e| self.sql(e))?;
        st.query_map(params![series, point, metric], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    /// The (point, metric) pairs a series has figures for.
    pub fn tracks(&self, series: &str) -> Result<Vec<(String, String)>, HistoryError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT DISTINCT f.point, f.metric FROM runs r JOIN figures f ON f.run = r.id
                 WHERE r.series = ?1 ORDER BY f.point, f.metric",
            )
            .map_err(|e| self.sql(e))?;
        st.query_map([series], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.sql(e))
    }

    /// How many runs a series has (failed ones too).
    pub fn run_count(&self, series: &str) -> Result<i64, HistoryError> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM runs WHERE series = ?1",
                [series],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))
    }

    pub fn add_change(&mut self, c: &StoredChange) -> Result<(), HistoryError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO changes (series, point, metric, run, found_at, before, after, p)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![c.series, c.point, c.metric, c.run, c.found_at, c.before, c.after, c.p],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The changes stored for a series, oldest first.
    pub fn changes(&self, series: &str) -> Result<Vec<StoredChange>, HistoryError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT series, point, metric, run, found_at, before, after, p FROM changes
                 WHERE series LIKE ?1 ORDER BY run, point, metric",
            )
            .map_err(|e| self.sql(e))?;
        st.query_map([format!("{series}%")], |r| {
            Ok(StoredChange {
                series: r.get(0)?,
                point: r.get(1)?,
                metric: r.get(2)?,
                run: r.get(3)?,
                found_at: r.get(4)?,
                before: r.get(5)?,
                after: r.get(6)?,
                p: r.get(7)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::entry::Figure;

    fn entry(at: &str, name: &str, value: f64, results: Option<&str>) -> Entry {
        Entry {
            at: at.into(),
            kind: RunKind::Run,
            name: name.into(),
            spec: format!("{{\"workload\":\"{name}\"}}"),
            target: "local".into(),
            lab: String::new(),
            environment: Environment::default(),
            status: "ok".into(),
            error: None,
            results: results.map(String::from),
            watch: None,
            command: format!("linerate run {name}"),
            figures: vec![Figure {
                point: String::new(),
                metric: "throughput_bps".into(),
                value,
            }],
        }
    }

    fn fresh(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("linerate-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("h.db")
    }

    #[test]
    fn runs_are_filtered_ordered_and_a_results_path_replaces() {
        let p = fresh("order");
        let mut s = Store::open(&p).unwrap();
        let a = s
            .record(&entry("2026-01-02T00:00:00Z", "rr", 1.0, None))
            .unwrap();
        s.record(&entry("2026-01-01T00:00:00Z", "stream", 2.0, Some("/x")))
            .unwrap();
        s.record(&entry("2026-01-03T00:00:00Z", "rr", 3.0, None))
            .unwrap();
        let all = s.runs(&Filter::default()).unwrap();
        let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["stream", "rr", "rr"], "oldest first");
        let rr = s
            .runs(&Filter {
                name: Some("rr".into()),
                limit: 1,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(rr.len(), 1);
        assert_eq!(rr[0].at, "2026-01-03T00:00:00Z", "the newest one");
        let since = s
            .runs(&Filter {
                since: Some("2026-01-02".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(since.len(), 2);
        // The same results file again: replaced, its figures too.
        let again = s
            .record(&entry("2026-01-01T00:00:00Z", "stream", 5.0, Some("/x")))
            .unwrap();
        assert_eq!(s.runs(&Filter::default()).unwrap().len(), 3);
        assert_eq!(s.figures(again).unwrap()[0].value, 5.0);
        let series = &s.run(a).unwrap().unwrap().series;
        let values: Vec<f64> = s
            .values(series, "", "throughput_bps")
            .unwrap()
            .iter()
            .map(|v| v.1)
            .collect();
        assert_eq!(values, [1.0, 3.0]);
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[test]
    fn a_spooled_run_is_recorded_when_the_store_opens_and_junk_is_refused() {
        let p = fresh("spool");
        Store::open(&p).unwrap();
        let f = spool(&p, &entry("2026-01-01T00:00:00Z", "rr", 1.0, None)).unwrap();
        assert!(f.exists());
        let s = Store::open(&p).unwrap();
        assert_eq!(s.runs(&Filter::default()).unwrap().len(), 1);
        assert!(!pending_dir(&p).exists());
        drop(s);
        let junk = p.with_file_name("junk.db");
        std::fs::write(&junk, vec![b'x'; 8192]).unwrap();
        match Store::open(&junk) {
            Err(HistoryError::Damaged { .. }) => {}
            other => panic!("{:?}", other.err()),
        }
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }
}
