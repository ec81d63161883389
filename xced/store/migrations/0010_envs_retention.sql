-- 0010: job environments once per distinct environment (issue 15: a job's environment
-- stays out of the daemon's memory; the job's spec names its digest), and what a restart
-- loads (retention, LSF CLEAN_PERIOD): unfinished elements and those that ended lately.
CREATE TABLE envs (
    digest      TEXT PRIMARY KEY,
    env         TEXT NOT NULL           -- canonical JSON {name: value}
) WITHOUT ROWID;
CREATE INDEX elements_end ON elements(end_time);
