-- A catalogue that rewinds: after an asynchronous standby is promoted, or a
-- backup restored, the database has forgotten deliveries that really
-- happened. The destinations hold the truth (every copy stashd sends
-- carries its delivery token, and keeps its source file's unique id), so
-- stashd pages their history and rebuilds what it lost before it sends
-- again.

-- The database server stashd last saw: its system identifier and timeline.
-- A promoted standby keeps the identifier and starts a new timeline; a
-- restore into a new cluster has another identifier. Either change means
-- the catalogue may have rewound.
CREATE TABLE database_identity (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    system_identifier bigint NOT NULL,
    timeline          bigint NOT NULL,
    checked_at        timestamptz NOT NULL DEFAULT now()
);

-- Reconciliations asked for (at start, after a failover, by `stashd
-- reconcile`): one row per destination until it has been paged. While a
-- destination has a row without finished_at, nothing is sent to it.
CREATE TABLE reconciles (
    destination_chat_id bigint PRIMARY KEY,
    reason              text NOT NULL,
    requested_at        timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    pages               integer NOT NULL DEFAULT 0,
    copies              integer NOT NULL DEFAULT 0,
    recovered           integer NOT NULL DEFAULT 0,
    -- Every reconciliation of the destination so far, for the report.
    recovered_total     bigint NOT NULL DEFAULT 0,
    last_error          text NOT NULL DEFAULT ''
);

-- Copies of parts found in a destination that no delivery row names (the
-- rows were lost): a delivery of a part whose file (unique id) is here is
-- recorded as sent with this message instead of being sent again.
CREATE TABLE destination_copies (
    destination_chat_id bigint NOT NULL,
    unique_id           text NOT NULL,
    dest_message_id     bigint NOT NULL,
    token               text NOT NULL,
    found_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination_chat_id, unique_id)
);

---- create above / drop below ----

DROP TABLE destination_copies;
DROP TABLE reconciles;
DROP TABLE database_identity;
