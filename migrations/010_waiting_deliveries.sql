-- Deliveries held by a route's delivery window: a package waits here for a
-- destination until the window of a route sending it there opens. A row
-- goes only once every part is sent there (or no route sends the package
-- there any more); nothing waiting is ever dropped.
CREATE TABLE waiting_deliveries (
    package_id          bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    destination_chat_id bigint NOT NULL,
    account             text NOT NULL,
    -- The route whose window opens first for it, and when.
    route               text NOT NULL,
    opens_at            timestamptz NOT NULL,
    -- The source messages carrying the parts, in order, as the account saw
    -- them: the send re-fetches them by id.
    source_chat_id      bigint NOT NULL,
    source_topic_id     bigint NOT NULL DEFAULT 0,
    message_ids         bigint[] NOT NULL,
    part_count          integer NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (package_id, destination_chat_id)
);
CREATE INDEX waiting_deliveries_due ON waiting_deliveries (account, opens_at);

-- A window that closed with deliveries still waiting: the backlog did not
-- fit in it (a partial run), kept for status.
CREATE TABLE window_reports (
    route     text NOT NULL,
    account   text NOT NULL,
    hours     text NOT NULL,
    closed_at timestamptz NOT NULL,
    sent      integer NOT NULL,
    waiting   integer NOT NULL,
    PRIMARY KEY (route, account, closed_at)
);
