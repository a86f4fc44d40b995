-- What a running daemon reports about each account, for `stashd status`.
ALTER TABLE accounts
    ADD COLUMN connected      boolean NOT NULL DEFAULT false,
    ADD COLUMN queue_depth    integer NOT NULL DEFAULT 0,
    ADD COLUMN queue_capacity integer NOT NULL DEFAULT 0,
    ADD COLUMN status_at      timestamptz;

---- create above / drop below ----

ALTER TABLE accounts DROP COLUMN connected, DROP COLUMN queue_depth, DROP COLUMN queue_capacity, DROP COLUMN status_at;
