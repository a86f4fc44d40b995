/*
 * stashd's declaration of the TDLib JSON interface it links against.
 *
 * The prebuilt TDLib that stashd uses (npm @prebuilt-tdlib/linux-x64-glibc,
 * TDLib 1.8.40) ships libtdjson.so without headers, while go-tdlib's cgo
 * preamble includes <td/telegram/td_json_client.h>. This file declares the
 * four functions go-tdlib calls, with the signatures TDLib 1.8.40 exports,
 * so the package compiles with only the shared library at hand. mk/tdlib.mk
 * puts the repository root on the include path (CGO_CFLAGS=-I...).
 *
 * A TDLib built from source installs its own, fuller header; either one
 * works, since both declare the same functions.
 */
#ifndef STASHD_TD_JSON_CLIENT_H
#define STASHD_TD_JSON_CLIENT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the identifier of a new TDLib instance. The instance sends no
 * updates until the first request is sent to it. */
int td_create_client_id(void);

/* Sends a JSON-serialized, NUL-terminated request to the TDLib instance
 * client_id. May be called from any thread. */
void td_send(int client_id, const char *request);

/* Receives the next update or response of any instance, waiting at most
 * timeout seconds; NULL when the timeout expires. Must not be called from
 * two threads at once. The result is valid until the next td_receive or
 * td_execute call on the same thread. */
const char *td_receive(double timeout);

/* Executes a request that TDLib documents as "can be called synchronously"
 * (getOption "version", setLogVerbosityLevel, ...). The result is valid
 * until the next td_receive or td_execute call on the same thread. */
const char *td_execute(const char *request);

#ifdef __cplusplus
}
#endif

#endif /* STASHD_TD_JSON_CLIENT_H */
