-- 0004: launch tokens are kept only as their SHA-256 (D-7); the store (Python) hashes the
-- plain tokens an older version wrote and clears them.
ALTER TABLE elements ADD COLUMN token_hash TEXT;
