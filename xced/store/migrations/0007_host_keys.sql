-- 0007: host keys (KEY-2, KEY-4, KEY-5). Revocations are kept here as well as in keys.yaml and win
-- over it, so editing or reverting the file never un-revokes a key; enrolment tokens are kept only
-- as their digest; key_events is the history of trust, revocation and un-revocation.
CREATE TABLE revocations (
    fingerprint TEXT PRIMARY KEY,
    time REAL NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT
);
CREATE TABLE enrolment_tokens (
    digest TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    host TEXT,
    expires REAL NOT NULL,
    created REAL NOT NULL,
    actor TEXT NOT NULL,
    used REAL,
    used_by TEXT
);
CREATE TABLE key_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT
);
