-- 0005: the ID of the stimulus (request, session, worker report) that caused each event (D-5).
ALTER TABLE events ADD COLUMN stimulus TEXT;
