/*
 * A stand-in for TDLib's libtdjson.so: the same four functions, relayed to
 * a TDLib-JSON server over a Unix socket.
 *
 * stashd's Telegram adapter (tg/tdlib) talks to TDLib through go-tdlib,
 * which calls td_create_client_id, td_send, td_receive and td_execute. This
 * library exports exactly those, so a binary linked against it runs the
 * production adapter and go-tdlib unchanged, while the requests go to
 * `stashd sim` (sim/tdjsonsim), which answers them from the Telegram
 * simulator as TDLib 1.8.40 would. mk/standin.mk builds it.
 *
 * Protocol (one connection per process and socket path, opened by the
 * first request of an instance that finds none live):
 *   - the socket is the path in the environment variable STASHD_TDJSON_SOCKET;
 *   - each td_send writes one line: the request's JSON object with
 *     "@client_id":N added as its last member (raw newlines, which JSON
 *     allows only between tokens, become spaces);
 *   - the server writes one line per response or update: a TDLib JSON object
 *     that carries "@client_id", which td_receive hands out unchanged.
 *
 * TDLib's semantics kept here:
 *   - td_create_client_id returns a new id without any I/O; an instance
 *     sends nothing until its first request;
 *   - td_receive waits at most timeout seconds and returns NULL when
 *     nothing came; everything the server sends is buffered without bound,
 *     as TDLib buffers, so the server never waits for a slow reader;
 *   - the string td_receive returns stays valid until the next td_receive
 *     in the same thread, the one td_execute returns until the next
 *     td_execute in the same thread (TDLib: until the next call of either);
 *   - td_execute answers the synchronous requests locally (getOption
 *     "version" and "commit_hash", the log settings): it needs no server;
 *   - every function may be called from any thread.
 *
 * What TDLib would show when the server goes away: for every instance that
 * was using the lost connection, the library itself emits
 * updateAuthorizationState authorizationStateClosing, answers each request
 * still waiting with error 500 "Request aborted", then emits
 * authorizationStateClosed, and drops anything later sent to that instance
 * (go-tdlib crashes on anything that arrives after Closed). A request to a
 * new instance reconnects. When the server cannot be reached, each request
 * of a new instance is answered with error 500 naming the reason.
 *
 * The library reads only three things of the JSON it relays: "@client_id",
 * "@extra" (to answer waiting requests after a loss) and the authorization
 * state of updateAuthorizationState (to know which instances are closed).
 */
#define _GNU_SOURCE

#include "td/telegram/td_json_client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SOCKET_ENV "STASHD_TDJSON_SOCKET"
#define TDLIB_VERSION "1.8.40"
#define TDLIB_COMMIT "22d49d5b87a4d5fc60a194dab02dd1d71529687f"

/* An object waiting for td_receive. */
struct item {
	struct item *next;
	char *json;
};

/* A request sent to the server and not yet answered, by its compacted
 * "@extra". */
struct pending {
	struct pending *next;
	char *extra;
};

enum client_state {
	CLIENT_NEW,    /* created, nothing sent yet */
	CLIENT_OPEN,   /* its requests go to connection `conn` */
	CLIENT_CLOSED, /* authorizationStateClosed was handed out */
};

struct client {
	enum client_state state;
	unsigned conn; /* its connection's number, */
	int fd;        /* and descriptor (open while the state is CLIENT_OPEN) */
	struct pending *pending;
};

/*
 * Lock order: wmu before mu. mu guards every variable below; wmu serialises
 * writes to the socket, so that a write never holds up td_receive, and the
 * reader takes it before closing the socket, so that no writer ever writes
 * to a closed (and possibly reused) descriptor.
 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrived;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static struct item *queue_head, *queue_tail;
static struct client *clients; /* indexed by client id; 0 is unused */
static int nclients;           /* allocated entries */
static int last_client_id;
static int sock = -1;      /* the newest connection, -1 when it ended */
static unsigned conn_seq;  /* connections opened so far; names the newest */
static char sock_path[sizeof ((struct sockaddr_un *)0)->sun_path]; /* its socket */
static int log_verbosity = 1;

/* The last strings handed to this thread by td_receive and by td_execute.
 * TDLib frees either on the next call of either; keeping them apart is
 * more lenient, and spares go-tdlib (whose goroutines share threads) a
 * td_execute freeing what its receiver is still copying. */
static __thread char *received_result;
static __thread char *executed_result;

static void init(void)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&arrived, &attr);
	pthread_condattr_destroy(&attr);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (p == NULL) {
		fputs("stand-in libtdjson: out of memory\n", stderr);
		abort();
	}
	return p;
}

/* format returns a newly allocated printf-formatted string. */
static char *format(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* --- a minimal JSON reader: just enough to find top-level members --- */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* skip_string returns the end of the string literal at p, or NULL. */
static const char *skip_string(const char *p)
{
	for (p++; *p != '\0' && *p != '"'; p++) {
		if (*p == '\\' && *++p == '\0')
			return NULL;
	}
	return *p == '"' ? p + 1 : NULL;
}

/* skip_value returns the end of the JSON value at p, or NULL. */
static const char *skip_value(const char *p)
{
	if (*p == '"')
		return skip_string(p);
	if (*p == '{' || *p == '[') {
		int depth = 0;
		while (*p != '\0') {
			if (*p == '"') {
				if ((p = skip_string(p)) == NULL)
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return NULL;
	}
	const char *start = p; /* number, true, false, null */
	while (*p != '\0' && strchr(",}] \t\r\n", *p) == NULL)
		p++;
	return p == start ? NULL : p;
}

/* member finds the value of key among the members of the object at obj;
 * it returns 0 when obj is not an object or has no such member. */
static int member(const char *obj, const char *key, const char **val, size_t *len)
{
	size_t klen = strlen(key);
	const char *p = skip_ws(obj);
	if (*p != '{')
		return 0;
	p = skip_ws(p + 1);
	while (*p == '"') {
		const char *kend = skip_string(p);
		if (kend == NULL)
			return 0;
		int match = (size_t)(kend - p - 2) == klen && memcmp(p + 1, key, klen) == 0;
		p = skip_ws(kend);
		if (*p != ':')
			return 0;
		p = skip_ws(p + 1);
		const char *vend = skip_value(p);
		if (vend == NULL)
			return 0;
		if (match) {
			*val = p;
			*len = (size_t)(vend - p);
			return 1;
		}
		p = skip_ws(vend);
		if (*p != ',')
			return 0;
		p = skip_ws(p + 1);
	}
	return 0;
}

/* compact copies a JSON value without the whitespace between its tokens,
 * so that "@extra" values compare equal whoever wrote them. */
static char *compact(const char *v, size_t len)
{
	char *out = xmalloc(len + 1), *o = out;
	int in_string = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = v[i];
		if (in_string) {
			if (ch == '\\' && i + 1 < len) {
				*o++ = ch;
				ch = v[++i];
			} else if (ch == '"') {
				in_string = 0;
			}
		} else if (ch == '"') {
			in_string = 1;
		} else if (strchr(" \t\r\n", ch) != NULL) {
			continue;
		}
		*o++ = ch;
	}
	*o = '\0';
	return out;
}

/* member_copy returns the compacted value of key, or NULL. */
static char *member_copy(const char *obj, const char *key)
{
	const char *v;
	size_t len;
	return member(obj, key, &v, &len) ? compact(v, len) : NULL;
}

/* member_is reports whether key's value is exactly the JSON text want. */
static int member_is(const char *obj, const char *key, const char *want)
{
	char *v = member_copy(obj, key);
	int eq = v != NULL && strcmp(v, want) == 0;
	free(v);
	return eq;
}

/* --- the queue td_receive reads; everything below runs with mu held --- */

static void push(char *json)
{
	struct item *it = xmalloc(sizeof *it);
	it->next = NULL;
	it->json = json;
	if (queue_tail != NULL)
		queue_tail->next = it;
	else
		queue_head = it;
	queue_tail = it;
	pthread_cond_broadcast(&arrived);
}

/* with_meta ends the object text `body` (an object missing its closing
 * brace) with "@extra" (when extra is not NULL) and "@client_id" (when id
 * is not 0), and frees body. */
static char *with_meta(char *body, const char *extra, int id)
{
	char idpart[32] = "";
	if (id != 0)
		snprintf(idpart, sizeof idpart, ",\"@client_id\":%d", id);
	char *s = format("%s%s%s%s}", body, extra ? ",\"@extra\":" : "", extra ? extra : "", idpart);
	free(body);
	return s;
}

/* escape returns text as the contents of a JSON string. */
static char *escape(const char *text)
{
	char *out = xmalloc(strlen(text) * 6 + 1), *o = out;
	for (const unsigned char *t = (const unsigned char *)text; *t != '\0'; t++) {
		if (*t == '"' || *t == '\\') {
			*o++ = '\\';
			*o++ = (char)*t;
		} else if (*t < 0x20) {
			o += sprintf(o, "\\u%04x", *t);
		} else {
			*o++ = (char)*t;
		}
	}
	*o = '\0';
	return out;
}

static void push_error(int id, const char *extra, int code, const char *message)
{
	char *m = escape(message);
	push(with_meta(format("{\"@type\":\"error\",\"code\":%d,\"message\":\"%s\"", code, m), extra, id));
	free(m);
}

static void push_auth_state(int id, const char *state)
{
	push(with_meta(format("{\"@type\":\"updateAuthorizationState\",\"authorization_state\":{\"@type\":\"%s\"}",
			      state),
		       NULL, id));
}

static void free_pending(struct client *c)
{
	while (c->pending != NULL) {
		struct pending *p = c->pending;
		c->pending = p->next;
		free(p->extra);
		free(p);
	}
}

/* client returns the record of id, or NULL for an id never created. */
static struct client *client(int id)
{
	if (id <= 0 || id > last_client_id)
		return NULL;
	if (id >= nclients) {
		int n = nclients ? nclients : 16;
		while (n <= id)
			n *= 2;
		struct client *grown = realloc(clients, (size_t)n * sizeof *grown);
		if (grown == NULL) {
			fputs("stand-in libtdjson: out of memory\n", stderr);
			abort();
		}
		memset(grown + nclients, 0, (size_t)(n - nclients) * sizeof *grown);
		clients = grown;
		nclients = n;
	}
	return &clients[id];
}

/* lost turns the loss of connection `conn` into what TDLib shows of an
 * instance that closes: Closing, every waiting request aborted, Closed. It
 * returns how many instances it closed. */
static int lost(unsigned conn)
{
	int closed = 0;
	for (int id = 1; id <= last_client_id; id++) {
		struct client *c = client(id);
		if (c->state != CLIENT_OPEN || c->conn != conn)
			continue;
		push_auth_state(id, "authorizationStateClosing");
		for (struct pending *p = c->pending; p != NULL; p = p->next)
			push_error(id, p->extra, 500, "Request aborted");
		free_pending(c);
		push_auth_state(id, "authorizationStateClosed");
		c->state = CLIENT_CLOSED;
		closed++;
	}
	return closed;
}

/* received handles one line from the server: it settles the request it
 * answers and notes a closed instance, then queues it for td_receive. */
static void received(char *line)
{
	const char *v;
	size_t len;
	struct client *c = NULL;
	if (member(line, "@client_id", &v, &len))
		c = client(atoi(v));
	if (c != NULL) {
		if (c->state == CLIENT_CLOSED) {
			/* Nothing may follow authorizationStateClosed. */
			free(line);
			return;
		}
		char *extra = member_copy(line, "@extra");
		if (extra != NULL) {
			for (struct pending **pp = &c->pending; *pp != NULL; pp = &(*pp)->next) {
				if (strcmp((*pp)->extra, extra) == 0) {
					struct pending *p = *pp;
					*pp = p->next;
					free(p->extra);
					free(p);
					break;
				}
			}
			free(extra);
		}
		if (member_is(line, "@type", "\"updateAuthorizationState\"") &&
		    member(line, "authorization_state", &v, &len) &&
		    member_is(v, "@type", "\"authorizationStateClosed\"")) {
			c->state = CLIENT_CLOSED;
			free_pending(c);
		}
	}
	push(line);
}

/* --- the connection --- */

struct reader_arg {
	int fd;
	unsigned conn;
};

/* reader reads the server's lines until the connection ends, then closes
 * it and reports the loss. */
static void *reader(void *arg)
{
	struct reader_arg a = *(struct reader_arg *)arg;
	free(arg);
	size_t cap = 1 << 16, len = 0;
	char *buf = xmalloc(cap);
	for (;;) {
		if (len == cap) {
			cap *= 2;
			char *grown = realloc(buf, cap);
			if (grown == NULL)
				break;
			buf = grown;
		}
		ssize_t n = read(a.fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		char *start = buf, *nl;
		pthread_mutex_lock(&mu);
		while ((nl = memchr(start, '\n', (size_t)(buf + len - start))) != NULL) {
			if (nl > start)
				received(strndup(start, (size_t)(nl - start)));
			start = nl + 1;
		}
		pthread_mutex_unlock(&mu);
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
	}
	free(buf);

	pthread_mutex_lock(&wmu);
	pthread_mutex_lock(&mu);
	close(a.fd);
	if (conn_seq == a.conn)
		sock = -1;
	int closed = lost(a.conn);
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&wmu);
	if (closed > 0) {
		/* A server that closed its clients first is no news. */
		fprintf(stderr, "stand-in libtdjson: connection to the TDLib-JSON server lost; %d TDLib instance(s) closed\n",
			closed);
	}
	return NULL;
}

/* hung_up reports whether the server closed connection fd: its reader has
 * not seen the end yet, but an instance must not start on it. */
static int hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* dial makes sure the newest connection is a live one to the socket the
 * environment names now, connecting when it is not (the instances of an
 * older connection keep theirs); on failure it writes the reason into why.
 * Runs with mu held. */
static int dial(char *why, size_t whylen)
{
	const char *path = getenv(SOCKET_ENV);
	if (sock >= 0 && path != NULL && strcmp(path, sock_path) == 0 && !hung_up(sock))
		return 0;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (path == NULL || *path == '\0') {
		snprintf(why, whylen, "stand-in libtdjson: %s is not set", SOCKET_ENV);
		return -1;
	}
	if (strlen(path) >= sizeof addr.sun_path) {
		snprintf(why, whylen, "stand-in libtdjson: the socket path in %s is too long", SOCKET_ENV);
		return -1;
	}
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
		snprintf(why, whylen, "stand-in libtdjson: connect to %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct reader_arg *arg = xmalloc(sizeof *arg);
	arg->fd = fd;
	arg->conn = conn_seq + 1;
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int err = pthread_create(&t, &attr, reader, arg);
	pthread_attr_destroy(&attr);
	if (err != 0) {
		snprintf(why, whylen, "stand-in libtdjson: start reader: %s", strerror(err));
		free(arg);
		close(fd);
		return -1;
	}
	sock = fd;
	conn_seq++;
	strcpy(sock_path, path);
	return 0;
}

static int write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* request_line returns request as one line with "@client_id" added as its
 * last member, or NULL when request is not a JSON object. */
static char *request_line(const char *request, int id)
{
	const char *p = skip_ws(request);
	const char *end = p + strlen(p);
	while (end > p && strchr(" \t\r\n", end[-1]) != NULL)
		end--;
	if (*p != '{' || end - p < 2 || end[-1] != '}')
		return NULL;
	const char *body = skip_ws(p + 1);
	int empty = body == end - 1;
	char *line = format("%.*s%s\"@client_id\":%d}\n", (int)(end - 1 - p), p, empty ? "" : ",", id);
	for (char *c = line; c[1] != '\0'; c++) {
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	}
	return line;
}

/* --- the four functions --- */

int td_create_client_id(void)
{
	pthread_once(&init_once, init);
	pthread_mutex_lock(&mu);
	int id = ++last_client_id;
	client(id); /* allocate its record */
	pthread_mutex_unlock(&mu);
	return id;
}

void td_send(int client_id, const char *request)
{
	pthread_once(&init_once, init);
	if (request == NULL)
		return;
	pthread_mutex_lock(&mu);
	struct client *c = client(client_id);
	if (c == NULL || c->state == CLIENT_CLOSED) {
		/* TDLib drops requests to instances that do not exist (any
		 * more); answering would crash go-tdlib after Closed. */
		pthread_mutex_unlock(&mu);
		return;
	}
	char *extra = member_copy(request, "@extra");
	char *line = request_line(request, client_id);
	if (line == NULL) {
		push_error(client_id, extra, 400, "Failed to parse JSON object as TDLib request");
		free(extra);
		pthread_mutex_unlock(&mu);
		return;
	}
	if (c->state == CLIENT_NEW) {
		char why[512];
		if (dial(why, sizeof why) != 0) {
			push_error(client_id, extra, 500, why);
			free(extra);
			free(line);
			pthread_mutex_unlock(&mu);
			return;
		}
		c->state = CLIENT_OPEN;
		c->conn = conn_seq;
		c->fd = sock;
	}
	if (extra != NULL) {
		/* Recorded before the write, so a loss from now on answers it. */
		struct pending *p = xmalloc(sizeof *p);
		p->extra = extra;
		p->next = c->pending;
		c->pending = p;
	}
	unsigned conn = c->conn;
	pthread_mutex_unlock(&mu);

	pthread_mutex_lock(&wmu);
	pthread_mutex_lock(&mu);
	/* Open under both locks: its reader, which closes it, waits for wmu. */
	c = client(client_id);
	int fd = c != NULL && c->state == CLIENT_OPEN && c->conn == conn ? c->fd : -1;
	pthread_mutex_unlock(&mu);
	if (fd >= 0 && write_all(fd, line, strlen(line)) != 0) {
		/* The reader sees the end of the connection and reports it. */
		shutdown(fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&wmu);
	free(line);
}

const char *td_receive(double timeout)
{
	pthread_once(&init_once, init);
	free(received_result);
	received_result = NULL;

	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	if (timeout > 0) {
		if (timeout > 1e9)
			timeout = 1e9;
		time_t secs = (time_t)timeout;
		deadline.tv_sec += secs;
		deadline.tv_nsec += (long)((timeout - (double)secs) * 1e9);
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&mu);
	while (queue_head == NULL && timeout > 0) {
		if (pthread_cond_timedwait(&arrived, &mu, &deadline) == ETIMEDOUT)
			break;
	}
	struct item *it = queue_head;
	if (it != NULL) {
		queue_head = it->next;
		if (queue_head == NULL)
			queue_tail = NULL;
		received_result = it->json;
		free(it);
	}
	pthread_mutex_unlock(&mu);
	return received_result;
}

const char *td_execute(const char *request)
{
	pthread_once(&init_once, init);
	free(executed_result);
	executed_result = NULL;
	if (request == NULL || *skip_ws(request) != '{')
		return NULL;

	char *extra = member_copy(request, "@extra");
	char *body;
	if (member_is(request, "@type", "\"getOption\"")) {
		if (member_is(request, "name", "\"version\""))
			body = format("{\"@type\":\"optionValueString\",\"value\":\"%s\"", TDLIB_VERSION);
		else if (member_is(request, "name", "\"commit_hash\""))
			body = format("{\"@type\":\"optionValueString\",\"value\":\"%s\"", TDLIB_COMMIT);
		else
			body = format("{\"@type\":\"error\",\"code\":400,\"message\":\"The option can't be get synchronously\"");
	} else if (member_is(request, "@type", "\"setLogVerbosityLevel\"")) {
		const char *v;
		size_t len;
		if (member(request, "new_verbosity_level", &v, &len)) {
			pthread_mutex_lock(&mu);
			log_verbosity = atoi(v);
			pthread_mutex_unlock(&mu);
		}
		body = format("{\"@type\":\"ok\"");
	} else if (member_is(request, "@type", "\"getLogVerbosityLevel\"")) {
		pthread_mutex_lock(&mu);
		body = format("{\"@type\":\"logVerbosityLevel\",\"verbosity_level\":%d", log_verbosity);
		pthread_mutex_unlock(&mu);
	} else if (member_is(request, "@type", "\"setLogStream\"") ||
		   member_is(request, "@type", "\"setLogTagVerbosityLevel\"") ||
		   member_is(request, "@type", "\"addLogMessage\"")) {
		/* The stand-in writes no log of its own beyond one line on a
		 * lost connection. */
		body = format("{\"@type\":\"ok\"");
	} else {
		body = format("{\"@type\":\"error\",\"code\":400,\"message\":\"The method can't be executed synchronously\"");
	}
	executed_result = with_meta(body, extra, 0);
	free(extra);
	return executed_result;
}
