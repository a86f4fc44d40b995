-- The delivery stage reads its next batch of due deliveries oldest first.
-- A delivery put off by a failure (a flood wait, a refused destination:
-- last_error set, opens_at later) keeps its place in that order, so a
-- destination or an account refused for an hour left its deliveries at
-- the head of the one queue index, and every batch read filtered them
-- again, row by row: 31 ms a read behind 90,000 of them. The queue index
-- now holds the deliveries no failure put off; those a failure put off
-- have one index by age, read once one of them is due, and one by when
-- they are due, which tells whether one is (store.DueWaiting).
DROP INDEX waiting_deliveries_queue;
CREATE INDEX waiting_deliveries_queue ON waiting_deliveries (account, created_at, package_id, destination_chat_id)
    WHERE last_error = '';
CREATE INDEX waiting_deliveries_put_off ON waiting_deliveries (account, created_at, package_id, destination_chat_id)
    WHERE last_error <> '';
CREATE INDEX waiting_deliveries_put_off_due ON waiting_deliveries (account, opens_at) WHERE last_error <> '';

---- create above / drop below ----

DROP INDEX waiting_deliveries_put_off_due;
DROP INDEX waiting_deliveries_put_off;
DROP INDEX waiting_deliveries_queue;
CREATE INDEX waiting_deliveries_queue ON waiting_deliveries (account, created_at, package_id, destination_chat_id);
