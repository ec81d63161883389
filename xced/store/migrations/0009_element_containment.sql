-- 0009: how each element's processes were kept together (JOB-1, issue 15): "cgroup-v2",
-- "cgroup-v1" or "subreaper", as its supervisor reported at the start; written with its end,
-- so `show` still names it after a daemon restart. NULL: never started, or from before 0009.
ALTER TABLE elements ADD COLUMN containment TEXT;
