-- 0006: failed starts and declined dispatches in a row of each element (DISPATCH-2), kept across
-- restarts so that max_dispatch_failures holds an element however often the daemon restarts.
ALTER TABLE elements ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
