-- 0001: jobs, their elements (per-element state, JOB-4), events (D-5), counters.
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    name        TEXT,
    user        TEXT NOT NULL,
    queue       TEXT NOT NULL,
    submit_time REAL NOT NULL,
    spec        TEXT NOT NULL            -- JSON: argv, cwd, env, limits, array, run_as ...
);
CREATE TABLE elements (
    job_id      INTEGER NOT NULL REFERENCES jobs(id),
    idx         INTEGER NOT NULL,
    state       TEXT NOT NULL,
    holds       TEXT NOT NULL DEFAULT '',
    start_time  REAL,
    end_time    REAL,
    exit_code   INTEGER,
    exit_signal TEXT,
    exit_reason TEXT,
    alloc       TEXT,                    -- JSON [[host, slots], ...]
    action      TEXT,                    -- pending kill/requeue on a running element
    PRIMARY KEY (job_id, idx)
) WITHOUT ROWID;
CREATE INDEX elements_state ON elements(state);
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    time        REAL NOT NULL,
    job_id      INTEGER NOT NULL,
    idx         INTEGER,                 -- NULL: the whole job
    kind        TEXT NOT NULL,
    from_state  TEXT,
    to_state    TEXT,
    actor       TEXT NOT NULL,
    reason      TEXT
);
CREATE INDEX events_job ON events(job_id);
CREATE TABLE counters (
    name        TEXT PRIMARY KEY,
    value       INTEGER NOT NULL
);
INSERT INTO counters VALUES ('next_job_id', 1);
