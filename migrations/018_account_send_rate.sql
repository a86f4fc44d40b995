-- The send budget (messages a minute) each account ran with when its
-- daemon last started it, for the delivery backlog's drain estimates that
-- `stashd status` and the metrics show; 0 until a daemon recorded it.
ALTER TABLE accounts ADD COLUMN send_rate double precision NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE accounts DROP COLUMN send_rate;
