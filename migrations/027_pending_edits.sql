-- pending_edits: a source message whose content an edit changed
-- (updateMessageContent), below the watermark of its source. TDLib reports
-- the change once, and the re-fetch it calls for waits in the listener's
-- queue, in memory: the listener notes it here, and forgets it once the
-- re-fetch is handled (or recorded as a dead letter). A start queues again
-- what a stop left noted. seq orders the notes of one message: a handling
-- forgets only the notes up to its own.
CREATE TABLE pending_edits (
    chat_id    bigint NOT NULL,
    message_id bigint NOT NULL,
    account    text NOT NULL,
    seq        bigint NOT NULL,
    noted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX pending_edits_account ON pending_edits (account, seq);

---- create above / drop below ----

DROP TABLE pending_edits;
