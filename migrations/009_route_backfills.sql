-- Backfills of routes added after packages were catalogued: one row per
-- route (the fingerprint of what it sends where) and account. A route
-- first seen at a start walks the packages catalogued before it (id <=
-- upto) whose origin source the account watches, and delivers those it
-- matches to its destinations; the cursor (last package id walked) makes
-- the walk resumable across restarts. Rows of routes since removed stay:
-- removing a route never deletes anything.
CREATE TABLE route_backfills (
    route_key  text NOT NULL,
    account    text NOT NULL REFERENCES accounts (name),
    name       text NOT NULL,
    upto       bigint NOT NULL,
    cursor     bigint NOT NULL DEFAULT 0,
    walked     integer NOT NULL DEFAULT 0,
    matched    integer NOT NULL DEFAULT 0,
    delivered  integer NOT NULL DEFAULT 0,
    failed     integer NOT NULL DEFAULT 0,
    last_error text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    done_at    timestamptz,
    PRIMARY KEY (route_key, account)
);
