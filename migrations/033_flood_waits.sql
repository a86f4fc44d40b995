-- The flood waits Telegram imposed on each account, kept until they end:
-- an account's pauses lived only in its process, so a restart (or the
-- instance taking the account over) made requests inside a wait Telegram
-- still ran, and Telegram lengthens the waits of an account that keeps
-- asking. Scope 'all' holds every request of the account (a 429 answering
-- any request but a send), 'send' only its sends (a 429 answering a send),
-- 'chat' only its sends to chat_id (a send refused with 429 in
-- updateMessageSendFailed); chat_id is 0 for the first two. until is by
-- the database's clock, so instances on other hosts read the same end.
-- Not fenced: a wait is Telegram's word on the account whoever holds its
-- lease. A row whose wait has ended is deleted when the account starts.
CREATE TABLE flood_waits (
    account text NOT NULL,
    scope   text NOT NULL CHECK (scope IN ('all', 'send', 'chat')),
    chat_id bigint NOT NULL DEFAULT 0,
    until   timestamptz NOT NULL,
    PRIMARY KEY (account, scope, chat_id)
);

---- create above / drop below ----

DROP TABLE flood_waits;
