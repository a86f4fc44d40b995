-- Account leases and fencing. An account's TDLib client runs in the one
-- daemon instance holding its lease (lease_owner until lease_until); every
-- acquisition, by any owner, increments lease_epoch, and a clean shutdown
-- releases the lease (owner NULL, lease_until = now(), epoch kept).
--
-- Fenced writes (watermark advance, delivery intent, sent record) carry
-- the writer's account and epoch in fence_account/fence_epoch; the trigger
-- below refuses them with SQLSTATE SD001 when the epoch is no longer the
-- account's, so a paused old owner that wakes up cannot deliver or move a
-- watermark. The two columns are carriers only: the trigger clears them
-- after the check, so a later unfenced write (the CLI, a maintenance
-- statement) never inherits a stale epoch. A NULL fence_epoch is not
-- checked.
ALTER TABLE accounts
    ADD COLUMN lease_epoch    bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_taken_at timestamptz;

ALTER TABLE sources
    ADD COLUMN fence_account text,
    ADD COLUMN fence_epoch   bigint;

ALTER TABLE deliveries
    ADD COLUMN fence_account text,
    ADD COLUMN fence_epoch   bigint;

CREATE FUNCTION stashd_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    IF NEW.fence_epoch IS NULL THEN
        NEW.fence_account := NULL;
        RETURN NEW;
    END IF;
    -- FOR SHARE: a takeover's UPDATE of the lease waits for this write to
    -- commit, and a write behind a takeover sees the new epoch.
    SELECT lease_epoch INTO current FROM accounts WHERE name = NEW.fence_account FOR SHARE;
    IF current IS DISTINCT FROM NEW.fence_epoch THEN
        RAISE EXCEPTION 'stale lease epoch % for account % (current %)',
            NEW.fence_epoch, NEW.fence_account, coalesce(current::text, 'none')
            USING ERRCODE = 'SD001';
    END IF;
    NEW.fence_account := NULL;
    NEW.fence_epoch := NULL;
    RETURN NEW;
END
$$;

CREATE TRIGGER sources_fence BEFORE INSERT OR UPDATE ON sources
    FOR EACH ROW EXECUTE FUNCTION stashd_check_fence();
CREATE TRIGGER deliveries_fence BEFORE INSERT OR UPDATE ON deliveries
    FOR EACH ROW EXECUTE FUNCTION stashd_check_fence();

---- create above / drop below ----

DROP TRIGGER deliveries_fence ON deliveries;
DROP TRIGGER sources_fence ON sources;
DROP FUNCTION stashd_check_fence();
ALTER TABLE deliveries DROP COLUMN fence_account, DROP COLUMN fence_epoch;
ALTER TABLE sources DROP COLUMN fence_account, DROP COLUMN fence_epoch;
ALTER TABLE accounts DROP COLUMN lease_epoch, DROP COLUMN lease_taken_at;
