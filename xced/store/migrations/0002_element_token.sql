-- 0002: a per-element secret that lets the job's own tasks call `xcecli launch` (JOB-7, CLI-3).
ALTER TABLE elements ADD COLUMN token TEXT;
