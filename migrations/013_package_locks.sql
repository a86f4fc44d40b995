-- Package locks: a row per held lock (a hash of a package's unique ids, its
-- content hash, or a package and destination being sent to), with its
-- owner and expiry. The holder renews it while it works and deletes it
-- when done; a holder that died leaves a row that anyone takes once it has
-- expired. A row holds no connection: a lock may outlive a wait on
-- Telegram (a download, a send turn) without starving the pool.
CREATE TABLE package_locks (
    name     text PRIMARY KEY,
    owner    text NOT NULL,
    until    timestamptz NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE package_locks;
