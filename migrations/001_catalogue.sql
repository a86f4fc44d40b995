-- The catalogue: accounts, sources and their watermarks, packages with their
-- parts and file listings, the source messages that led to them, deliveries
-- and dead letters. Message ids are TDLib ids (server id << 20) unless the
-- column name says server.

CREATE TABLE accounts (
    name        text PRIMARY KEY,
    user_id     bigint,
    is_premium  boolean NOT NULL DEFAULT false,
    -- Lease: the daemon instance that owns the account's TDLib client.
    lease_owner text,
    lease_until timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sources (
    chat_id        bigint PRIMARY KEY,
    account        text NOT NULL REFERENCES accounts (name),
    kind           text NOT NULL DEFAULT 'channel',
    title          text NOT NULL DEFAULT '',
    -- Every message with server id <= watermark has been handled.
    watermark      bigint NOT NULL DEFAULT 0 CHECK (watermark >= 0),
    -- A dirty source needs a catch-up before it can be trusted again.
    dirty          boolean NOT NULL DEFAULT true,
    dirty_reason   text NOT NULL DEFAULT 'new',
    dirty_since    timestamptz DEFAULT now(),
    -- Highest server id seen through the live stream or a scan.
    last_seen      bigint NOT NULL DEFAULT 0,
    last_scan_at   timestamptz,
    next_scan_at   timestamptz NOT NULL DEFAULT now(),
    empty_scans    integer NOT NULL DEFAULT 0,
    failures       integer NOT NULL DEFAULT 0,
    circuit_until  timestamptz,
    last_error     text NOT NULL DEFAULT '',
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE topics (
    chat_id    bigint NOT NULL REFERENCES sources (chat_id) ON DELETE CASCADE,
    thread_id  bigint NOT NULL,
    name       text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, thread_id)
);

CREATE TABLE packages (
    id                bigserial PRIMARY KEY,
    -- SHA-256 over the parts' bytes in order.
    content_hash      bytea NOT NULL UNIQUE CHECK (length(content_hash) = 32),
    name              text NOT NULL,
    format            text NOT NULL,
    total_size        bigint NOT NULL CHECK (total_size >= 0),
    part_count        integer NOT NULL CHECK (part_count > 0),
    file_count        integer NOT NULL DEFAULT 0,
    listing_truncated boolean NOT NULL DEFAULT false,
    listing_error     text NOT NULL DEFAULT '',
    origin_chat_id    bigint NOT NULL,
    origin_message_id bigint NOT NULL,
    origin_topic_id   bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE package_parts (
    package_id        bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    idx               integer NOT NULL CHECK (idx >= 0),
    file_name         text NOT NULL,
    size              bigint NOT NULL,
    sha256            bytea NOT NULL,
    source_chat_id    bigint NOT NULL,
    source_message_id bigint NOT NULL,
    PRIMARY KEY (package_id, idx)
);

-- Every Telegram file unique id known to carry a part of a package: the
-- part's own and those of identical re-posts (layer 2 of the dedup).
CREATE TABLE remote_files (
    unique_id  text PRIMARY KEY,
    package_id bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    idx        integer NOT NULL
);

CREATE TABLE package_files (
    package_id bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    ord        integer NOT NULL,
    path       text NOT NULL,
    size       bigint NOT NULL DEFAULT 0,
    is_dir     boolean NOT NULL DEFAULT false,
    -- The stored name would escape an extraction directory (absolute, ..,
    -- drive letter) or needed cleaning.
    unsafe     boolean NOT NULL DEFAULT false,
    PRIMARY KEY (package_id, ord)
);

-- One row per handled source message (layer 1 of the dedup: the source key).
CREATE TABLE source_messages (
    chat_id     bigint NOT NULL,
    message_id  bigint NOT NULL,
    topic_id    bigint NOT NULL DEFAULT 0,
    album_id    bigint NOT NULL DEFAULT 0,
    date        timestamptz,
    file_name   text NOT NULL DEFAULT '',
    file_size   bigint NOT NULL DEFAULT 0,
    unique_id   text NOT NULL DEFAULT '',
    -- package, duplicate, not_archive, part_pending, dead_letter
    outcome     text NOT NULL CHECK (outcome IN ('package', 'duplicate', 'not_archive', 'part_pending', 'dead_letter')),
    set_key     text NOT NULL DEFAULT '',
    part_index  integer NOT NULL DEFAULT 0,
    package_id  bigint REFERENCES packages (id) ON DELETE SET NULL,
    handled_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX source_messages_pending ON source_messages (chat_id, topic_id, set_key) WHERE outcome = 'part_pending';
CREATE INDEX source_messages_package ON source_messages (package_id);

-- One row per (package, destination, part): the intent is written before the
-- send, the destination message id right after Telegram confirms it.
CREATE TABLE deliveries (
    package_id          bigint NOT NULL REFERENCES packages (id) ON DELETE CASCADE,
    destination_chat_id bigint NOT NULL,
    part_idx            integer NOT NULL,
    token               text NOT NULL UNIQUE,
    -- intent: written, not confirmed; sent: destination id known; failed: given up.
    state               text NOT NULL DEFAULT 'intent' CHECK (state IN ('intent', 'sent', 'failed')),
    dest_message_id     bigint,
    account             text NOT NULL,
    error               text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    PRIMARY KEY (package_id, destination_chat_id, part_idx)
);
CREATE UNIQUE INDEX deliveries_dest_message ON deliveries (destination_chat_id, dest_message_id) WHERE dest_message_id IS NOT NULL;

CREATE TABLE dead_letters (
    chat_id         bigint NOT NULL,
    message_id      bigint NOT NULL,
    account         text NOT NULL,
    error_class     text NOT NULL,
    reason          text NOT NULL,
    attempts        integer NOT NULL DEFAULT 1,
    next_attempt_at timestamptz,
    -- pending: will be retried; exhausted: attempt cap reached or permanent; resolved: a retry succeeded.
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'exhausted', 'resolved')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX dead_letters_due ON dead_letters (next_attempt_at) WHERE state = 'pending';

---- create above / drop below ----

DROP TABLE dead_letters;
DROP TABLE deliveries;
DROP TABLE source_messages;
DROP TABLE package_files;
DROP TABLE remote_files;
DROP TABLE package_parts;
DROP TABLE packages;
DROP TABLE topics;
DROP TABLE sources;
DROP TABLE accounts;
