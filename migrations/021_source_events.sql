-- What happens to sources after stashd first read them.
--
-- replaced_documents: a source message whose document an edit replaced
-- (editMessageMedia). The message keeps its id, so its source_messages row
-- is moved here and the new document goes through the ingest path as a
-- package of its own.
--
-- dead_letters.state 'deleted': the source message was deleted before its
-- package could be fetched; terminal, never retried.
--
-- source_names: the chat id each configured @username resolved to the
-- first time. A later start keeps that id, and records here when the name
-- no longer leads to it (renamed_at, current_chat_id).
--
-- sources.access 'not_member': a public chat the account reads without
-- having joined it; TDLib reports the account's status as "left".
CREATE TABLE replaced_documents (
    chat_id        bigint NOT NULL,
    message_id     bigint NOT NULL,
    old_unique_id  text NOT NULL,
    new_unique_id  text NOT NULL,
    old_outcome    text NOT NULL,
    old_package_id bigint REFERENCES packages (id) ON DELETE SET NULL,
    replaced_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id, old_unique_id)
);

ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_state_check;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_state_check
    CHECK (state IN ('pending', 'exhausted', 'resolved', 'deleted'));

CREATE TABLE source_names (
    account         text NOT NULL,
    username        text NOT NULL,
    chat_id         bigint NOT NULL,
    resolved_at     timestamptz NOT NULL DEFAULT now(),
    -- Set when the name stopped resolving to chat_id; current_chat_id is
    -- what it resolves to now (NULL: to nothing).
    renamed_at      timestamptz,
    current_chat_id bigint,
    PRIMARY KEY (account, username)
);

ALTER TABLE sources DROP CONSTRAINT sources_access_check;
ALTER TABLE sources ADD CONSTRAINT sources_access_check CHECK (access IN ('ok', 'inaccessible', 'not_member'));

---- create above / drop below ----

UPDATE sources SET access = 'ok' WHERE access = 'not_member';
ALTER TABLE sources DROP CONSTRAINT sources_access_check;
ALTER TABLE sources ADD CONSTRAINT sources_access_check CHECK (access IN ('ok', 'inaccessible'));
DROP TABLE source_names;
UPDATE dead_letters SET state = 'exhausted' WHERE state = 'deleted';
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_state_check;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_state_check CHECK (state IN ('pending', 'exhausted', 'resolved'));
DROP TABLE replaced_documents;
