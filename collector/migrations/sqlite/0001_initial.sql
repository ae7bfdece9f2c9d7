-- The collector's schema (SQLite). Keep in step with ../postgres/0001_initial.sql:
-- the same tables, columns and indexes; only the id and blob types differ.
-- Times are Unix seconds (BIGINT) as the collector received them; the
-- host's own times (started_at) are kept as the text it sent.

CREATE TABLE reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    run_id TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    received_at BIGINT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    status TEXT NOT NULL,
    kept BIGINT NOT NULL,
    repaired BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    skipped BIGINT NOT NULL,
    truncated BIGINT NOT NULL,
    bundle_name TEXT,
    bundle_serial BIGINT,
    bundle_digest TEXT,
    error TEXT,
    raw BLOB NOT NULL,
    UNIQUE (host, run_id)
);
CREATE INDEX reports_received_at ON reports (received_at);
CREATE INDEX reports_host_sequence ON reports (host, sequence);

CREATE TABLE hosts (
    name TEXT PRIMARY KEY NOT NULL,
    last_report_id BIGINT,
    last_run_id TEXT NOT NULL,
    last_sequence BIGINT NOT NULL,
    last_status TEXT NOT NULL,
    last_seen BIGINT NOT NULL,
    last_started_at TEXT NOT NULL,
    bundle_name TEXT,
    bundle_serial BIGINT,
    kept BIGINT NOT NULL,
    repaired BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    skipped BIGINT NOT NULL,
    -- How many of this host's reports are stored (kept in step by ingest
    -- and retention, so the fleet total is a sum over hosts, not a count
    -- over every report).
    reports BIGINT NOT NULL
);
CREATE INDEX hosts_last_seen ON hosts (last_seen);
CREATE INDEX hosts_last_report ON hosts (last_report_id);

CREATE TABLE promise_results (
    report_id BIGINT NOT NULL REFERENCES reports (id) ON DELETE CASCADE,
    host TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    kind TEXT NOT NULL,
    promiser TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT,
    changes TEXT NOT NULL
);
CREATE INDEX promise_results_report ON promise_results (report_id);
CREATE INDEX promise_results_outcome_time ON promise_results (outcome, received_at);
CREATE INDEX promise_results_promise ON promise_results (kind, promiser);

CREATE TABLE facts (
    host TEXT PRIMARY KEY NOT NULL,
    report_id BIGINT NOT NULL,
    received_at BIGINT NOT NULL,
    sys TEXT NOT NULL,
    probes TEXT NOT NULL,
    classes TEXT NOT NULL
);

CREATE TABLE daily_summaries (
    host TEXT NOT NULL,
    day BIGINT NOT NULL,
    reports BIGINT NOT NULL,
    kept_runs BIGINT NOT NULL,
    repaired_runs BIGINT NOT NULL,
    failed_runs BIGINT NOT NULL,
    refused_runs BIGINT NOT NULL,
    promises_repaired BIGINT NOT NULL,
    promises_failed BIGINT NOT NULL,
    PRIMARY KEY (host, day)
);
