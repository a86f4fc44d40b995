// Package tdschema checks TDLib JSON against TDLib's own schema, the
// td_api.tl that the go-tdlib module stashd builds with ships (TDLib
// 1.8.40): that every object names a constructor of the schema, that every
// member is a field of that constructor with a value of the field's type
// as TDLib writes it in JSON, and that nothing the schema requires is
// missing. The TDLib-JSON world's tests run every object it writes and
// every request it reads through it, so that the world cannot drift from
// what TDLib really sends.
//
// It owns the reading of td_api.tl (through go-tdlib's tlparser) and the
// rules of TDLib's JSON encoding; it knows nothing of stashd's types and
// must not: it is leaf test infrastructure.
package tdschema
