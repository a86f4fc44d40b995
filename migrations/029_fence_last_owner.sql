-- A released lease keeps naming its last owner for the fence. Release
-- clears lease_owner (a standby takes the lease at once) but keeps the
-- epoch; after a rewind handed that epoch out again, the instance that held
-- it before the rewind would pass a fence that finds no owner to compare.
-- lease_last_owner is the owner of the last acquisition, kept through a
-- release: the fence compares the writer with the owner, or when released
-- with the last one, so the releasing owner's last writes still pass and
-- another owner's are refused.
ALTER TABLE accounts ADD COLUMN lease_last_owner text;
UPDATE accounts SET lease_last_owner = lease_owner;

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
    SELECT lease_epoch, coalesce(lease_owner, lease_last_owner) INTO current, holder
        FROM accounts WHERE name = account FOR SHARE;
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

ALTER TABLE accounts DROP COLUMN lease_last_owner;
