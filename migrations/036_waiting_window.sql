-- A delivery waiting for a route's window (route set, opens_at the
-- window's opening) kept its place in the one queue index of the
-- deliveries no failure put off, so a backlog waiting for a window that
-- opens in hours headed that index, and every batch read passed it again,
-- row by row (or sorted every due delivery instead): 43 ms a read behind
-- 90,000 of them, on the realtime path once per new package. The queue
-- index now holds the deliveries due since they were queued (no route);
-- those with a route (waiting for a window, handed over by another
-- account) have one index by age, read once one of them is due, and one
-- by when they are due, which tells whether one is (store.DueWaiting), as
-- the deliveries a failure put off have since migration 031.
DROP INDEX waiting_deliveries_queue;
CREATE INDEX waiting_deliveries_queue ON waiting_deliveries (account, created_at, package_id, destination_chat_id)
    WHERE last_error = '' AND route = '';
CREATE INDEX waiting_deliveries_routed ON waiting_deliveries (account, created_at, package_id, destination_chat_id)
    WHERE last_error = '' AND route <> '';
CREATE INDEX waiting_deliveries_routed_due ON waiting_deliveries (account, opens_at) WHERE last_error = '' AND route <> '';

---- create above / drop below ----

DROP INDEX waiting_deliveries_routed_due;
DROP INDEX waiting_deliveries_routed;
DROP INDEX waiting_deliveries_queue;
CREATE INDEX waiting_deliveries_queue ON waiting_deliveries (account, created_at, package_id, destination_chat_id)
    WHERE last_error = '';
