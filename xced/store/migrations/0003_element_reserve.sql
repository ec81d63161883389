-- 0003: what a running element holds on each host (slots, mem MB, resources; RES-2 rusage).
ALTER TABLE elements ADD COLUMN reserve TEXT;
