-- Whether each configured account's TDLib session is logged in, as the
-- daemon last found it: an account that is not (never logged in, or
-- logged out remotely) is not run, and `stashd status` says why. A row is
-- written when a daemon first tries the account.
CREATE TABLE account_auth (
    account    text PRIMARY KEY,
    logged_in  boolean NOT NULL,
    -- TDLib's authorization state when not logged in, e.g.
    -- authorizationStateWaitPhoneNumber or authorizationStateClosed.
    state      text NOT NULL DEFAULT '',
    reason     text NOT NULL DEFAULT '',
    -- since is when logged_in last changed.
    since      timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE account_auth;
