-- 0008: idempotency keys of submits (JOB-10, D-3). Written in the transaction that inserts the
-- job, so a key exists exactly when its job does; scoped per user (the same key from another
-- user is another key). `answer` is the SubmitResponse JSON the first submit got, given again
-- to a retry; `body_hash` the SHA-256 of the request as canonical JSON. Rows older than a day
-- are deleted (by `time`, indexed); nothing is loaded into memory.
CREATE TABLE idempotency_keys (
    user TEXT NOT NULL,
    key TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    body_hash TEXT NOT NULL,
    time REAL NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (user, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_time ON idempotency_keys (time);
