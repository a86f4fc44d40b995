-- The fence also names the lease's owner. A catalogue that rewinds (a
-- lagging standby promoted, a backup restored) brings an account's lease
-- row back to an earlier epoch, and the next acquisition hands a later
-- epoch out again: an instance that held that epoch before the rewind, and
-- has not renewed since, would pass a check of the epoch alone. A writer
-- whose store took the lease sends its owner after the account in
-- fence_account (account, U+001F, owner); the write is refused when the
-- row names another owner at that epoch. A fence without an owner (the
-- CLI, a lease taken by another store) is checked by its epoch alone, and
-- a released lease (no owner) still takes its last owner's writes.
CREATE OR REPLACE FUNCTION stashd_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
    holder  text;
    account text;
    writer  text;
BEGIN
    IF NEW.fence_epoch IS NULL THEN
        NEW.fence_account := NULL;
        RETURN NEW;
    END IF;
    account := split_part(NEW.fence_account, E'\x1f', 1);
    writer := nullif(substr(NEW.fence_account, length(account) + 2), '');
    -- FOR SHARE: a takeover's UPDATE of the lease waits for this write to
    -- commit, and a write behind a takeover sees the new epoch.
    SELECT lease_epoch, lease_owner INTO current, holder FROM accounts WHERE name = account FOR SHARE;
    IF current IS DISTINCT FROM NEW.fence_epoch THEN
        RAISE EXCEPTION 'stale lease epoch % for account % (current %)',
            NEW.fence_epoch, account, coalesce(current::text, 'none')
            USING ERRCODE = 'SD001';
    END IF;
    IF writer IS NOT NULL AND holder IS NOT NULL AND holder <> writer THEN
        RAISE EXCEPTION 'stale lease epoch % for account % (held by another owner at that epoch)',
            NEW.fence_epoch, account
            USING ERRCODE = 'SD001';
    END IF;
    NEW.fence_account := NULL;
    NEW.fence_epoch := NULL;
    RETURN NEW;
END
$$;

---- create above / drop below ----

CREATE OR REPLACE FUNCTION stashd_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    IF NEW.fence_epoch IS NULL THEN
        NEW.fence_account := NULL;
        RETURN NEW;
    END IF;
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
