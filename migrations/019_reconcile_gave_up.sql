-- A reconciliation given up: the destination's history could not be read
-- (Telegram said the failure will not pass), so its deliveries are no longer
-- held; last_error says why.
ALTER TABLE reconciles ADD COLUMN gave_up boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE reconciles DROP COLUMN gave_up;
