-- A basic group upgraded to a supergroup continues as a new chat:
-- upgraded_to is that chat (0 when the source was never upgraded). The
-- daemon watches the new chat as a source of its own (created with the
-- upgrade) and, after a restart, follows the upgrade again from here.
ALTER TABLE sources ADD COLUMN upgraded_to bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE sources DROP COLUMN upgraded_to;
