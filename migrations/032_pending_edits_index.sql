-- pending_edits_account (account, seq) served the first reading of the
-- noted edits, by account; they are read by chat (the primary key leads
-- with chat_id) since a source taken over keeps its notes. No query uses
-- it, and every note and its forgetting paid for it.
DROP INDEX pending_edits_account;

---- create above / drop below ----

CREATE INDEX pending_edits_account ON pending_edits (account, seq);
