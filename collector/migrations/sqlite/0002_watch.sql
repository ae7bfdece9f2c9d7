-- Cross-checks of the hosts' watch histories (docs/fleet.md, "Tampered
-- hosts"). Keep in step with ../postgres/0002_watch.sql.

-- The signature each report was uploaded with, so the collector can hand
-- a host's latest report to its neighbours exactly as the host signed it
-- (NULL for reports stored before this migration).
ALTER TABLE reports ADD COLUMN signature TEXT;

-- Per host: the last head of its watch history that extended every head
-- seen before it (trust on first use: the first head seen), and the one
-- before it.
CREATE TABLE watch_heads (
    host TEXT PRIMARY KEY NOT NULL,
    length BIGINT NOT NULL,
    head TEXT NOT NULL,
    report_id BIGINT NOT NULL,
    received_at BIGINT NOT NULL,
    previous_length BIGINT,
    previous_head TEXT
);

-- Every check that was not consistent (verdict: rewritten, backwards,
-- unverifiable, malformed, missing): the evidence, kept when retention
-- deletes the report itself. A host with a row here is "tampered".
CREATE TABLE watch_verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    report_id BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    verdict TEXT NOT NULL,
    detail TEXT,
    seen_length BIGINT NOT NULL,
    seen_head TEXT NOT NULL,
    new_length BIGINT,
    new_head TEXT
);
CREATE INDEX watch_verdicts_host ON watch_verdicts (host, id);
