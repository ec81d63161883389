-- 0011: lost hosts and host control (SCHED-4, CLI-4; issue 16).
-- Each element's dispatch count: every dispatch carries it to the worker, and a report
-- or a running copy of another attempt is a stale copy, fenced (killed, never recorded).
-- 0: never dispatched, or dispatched before 0011 (such a copy reports no attempt).
ALTER TABLE elements ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
-- What admins did to hosts (`xceadmin hosts open|close|drain`) and what happened to them
-- (declared lost, drained): a host's admin status at a restart is its latest
-- open/close/drain event's.
CREATE TABLE host_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    time        REAL NOT NULL,
    host        TEXT NOT NULL,
    kind        TEXT NOT NULL,          -- open | close | drain | drained | lost | rejoined
    actor       TEXT NOT NULL,          -- admin:NAME, system
    reason      TEXT
);
CREATE INDEX host_events_host ON host_events(host, seq);
