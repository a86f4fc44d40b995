// Package reconcile rebuilds the delivery records a catalogue lost when it
// rewound: after an asynchronous standby was promoted, or a backup
// restored, the database no longer knows deliveries that really happened,
// and sending them again would put a second copy in the destination.
//
// The destinations hold the truth: every copy stashd sends carries its
// delivery token in its caption and keeps its source file's unique id.
// Destination pages a destination's history back from its newest message
// (getChatHistory, one request per 100 messages) and records every copy it
// finds (store.RecordCopy) until a long run of copies the catalogue knew
// already shows that everything older is known, or the chat begins. Until
// a destination's reconciliation has finished, nothing is sent to it
// (store.ReconcilePending).
//
// The rewind also lost the notes that would have deleted second copies of
// delivered parts (store.StraySend): a copy carrying the token of a part
// the catalogue records with another message is deleted once the recorded
// one was seen carrying the same file, unless the deletion fails (it is
// then logged, and noted for the account when the failure may pass).
//
// reconcile reads Telegram, deletes second copies and writes the store;
// it never sends, and it does not decide when a reconciliation is needed
// (the daemon does, from the database's identity and the destinations'
// newest copies).
package reconcile
