-- The delivery tokens an account watches for a while after it took the
-- deliveries of an account away (store.TakeWaiting): a send of that
-- account may still land, after the taker sent the part itself, and is
-- deleted as a second copy only if the taker's session hears of it. The
-- watch lived only in the taker's process, so a restart (or its lease
-- moving to another instance) within the window left such a message in
-- its destination for good. A row is written in the statement that moves
-- its delivery, and read back when the taking account (account) starts;
-- sender is the account away, whose send it may be. until is by the
-- database's clock. Not fenced: a watch is the taking account's whoever
-- holds its lease. Rows past until are deleted when an account starts
-- and when deliveries are taken.
CREATE TABLE late_sends (
    token               text PRIMARY KEY,
    destination_chat_id bigint NOT NULL,
    sender              text NOT NULL,
    account             text NOT NULL,
    until               timestamptz NOT NULL
);
CREATE INDEX late_sends_account ON late_sends (account, until);
CREATE INDEX late_sends_until ON late_sends (until);

---- create above / drop below ----

DROP TABLE late_sends;
