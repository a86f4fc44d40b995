-- Forum topics stashd created (or found) in destination forums for routes
-- with topic = "same": the topic named like a package's source topic. The
-- row is the arbiter: a topic is created only by whoever holds the
-- per-(destination, name) lock and finds no row, so a restart, another
-- account or another instance reuses it and never creates it twice. The
-- row is written (thread_id 0) before createForumTopic: one found so after
-- a crash means the topic may exist already, and it is looked up by name
-- (getForumTopics) before another is created.
CREATE TABLE destination_topics (
    destination_chat_id bigint NOT NULL,
    name                text NOT NULL,
    -- 0 while the creation has started but its topic is not recorded.
    thread_id           bigint NOT NULL DEFAULT 0,
    -- The account that created it, or began to.
    created_by          text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (destination_chat_id, name)
);

---- create above / drop below ----

DROP TABLE destination_topics;
