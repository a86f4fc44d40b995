-- waiting_deliveries becomes the delivery queue: every delivery a
-- catalogued package owes a destination waits here until it is sent,
-- whether for a route's window (route names it, opens_at is its opening)
-- or only for the account's send budget (route '', opens_at the time it was
-- queued). A delivery that failed and will be tried again waits until
-- opens_at with its attempts and last error.
ALTER TABLE waiting_deliveries
    ADD COLUMN attempts   integer NOT NULL DEFAULT 0,
    ADD COLUMN last_error text NOT NULL DEFAULT '';

-- The delivery stage reads the due deliveries oldest first.
CREATE INDEX waiting_deliveries_queue ON waiting_deliveries (account, created_at, package_id, destination_chat_id);

---- create above / drop below ----

DROP INDEX waiting_deliveries_queue;
ALTER TABLE waiting_deliveries DROP COLUMN attempts, DROP COLUMN last_error;
