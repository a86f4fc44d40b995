-- A row of config_mismatches is an instance's report, renewed while the
-- difference lasts: an instance is named host:pid by default, so one
-- restarted (its configuration put right) or taken out of service never
-- deletes what it recorded under its old name. until, by the database's
-- clock, is three lease TTLs of the recording instance after it last
-- renewed the row; stashd status shows only rows not past it, and the
-- next acquisition of the account deletes those past it. Rows recorded
-- before count as past: the instances still differing record them again
-- within a lease TTL.
ALTER TABLE config_mismatches ADD COLUMN until timestamptz NOT NULL DEFAULT now();
ALTER TABLE config_mismatches ALTER COLUMN until DROP DEFAULT;

---- create above / drop below ----

ALTER TABLE config_mismatches DROP COLUMN until;
