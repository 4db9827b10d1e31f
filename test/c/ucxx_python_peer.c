/*
 * ucxx_python_peer: a plain-UCP C program (libucp only, no ucxx-ts code) that behaves as a ucxx Python
 * asyncio endpoint on the wire: the peer-information handshake of ucxx Python's exchange_peer_info.py
 * and the message framing of its Endpoint (send/recv, send_multi/recv_multi, send_obj/recv_obj).
 * Driven by test/ucxx-python.test.ts. Everything here is written from ucxx's sources, independently of
 * the TypeScript implementation (its own SHA-1, Python repr, and header codec).
 *
 * Build:  gcc -O2 -Wall -Wextra ucxx_python_peer.c -o ucxx_python_peer -lucp -lucs
 * Usage:  ucxx_python_peer server SCENARIO              listen on 127.0.0.1:0, print "PORT <n>", accept one
 *         ucxx_python_peer client HOST PORT SCENARIO    connect to HOST:PORT
 * Result: "OK ..." on stdout and exit 0, or one "FAIL <what>" line and exit 1; SIGALRM (after TIMEOUT_S,
 *         or sent by the test) prints the phase it is stuck in.
 *
 * UCP set-up as ucxx Python's defaults: features TAG | WAKEUP | STREAM | AM | RMA
 * (python/ucxx/ucxx/_lib/libucxx.pyx, UCXContext), endpoints with UCP_ERR_HANDLING_MODE_PEER
 * (endpoint_error_handling=True).
 *
 * The handshake (python/ucxx/ucxx/_lib_async/exchange_peer_info.py, listener.py, application_context.py):
 *   msg_tag  = hash64bits("msg_tag", 16 random bytes, ep handle)
 *   hash64bits(*args) = first 16 hex digits of sha1(repr(args)), i.e. the first 8 digest bytes big-endian
 *   message  = struct.pack("QQ", msg_tag, hash64bits(msg_tag)): 16 bytes, two little-endian u64
 *   the listener (server) stream-sends its message, then stream-receives the peer's 16 bytes (WAITALL);
 *   the client receives first, then sends. Then the checksum is checked. After it, a side sends tag
 *   messages with the peer's msg_tag and receives with its own (full mask). This program prints
 *   "TAGS own=0x... peer=0x..." once the handshake is done.
 *
 * Framing (python/ucxx/ucxx/_lib_async/endpoint.py, cpp/src/request_tag_multi.cpp, cpp/src/header.cpp):
 *   send(b)         one tag message
 *   send_obj(b)     array("Q", [len(b)]) (8 bytes, little-endian), then b: two tag messages
 *   send_multi(bs)  ceil(n/100) headers, then each frame; a header (1209 bytes, no padding):
 *                   u8 next, u64 nframes, i32 isCUDA[100], u64 size[100], unused entries zero
 *   a user tag t:   hash64bits(msg_tag, hash(t)); with force_tag the tag t itself
 *
 * SCENARIO full (the exchange, identical in both directions; "A" = ucxx-ts sends, this program checks
 * every byte, then "B" = this program sends the same with seeds + 100, ucxx-ts checks):
 *   1. send() of SEND_SIZES[k] bytes, pattern seed 10 + k
 *   2. send_multi() of MULTI_SIZES (frame i seed 20 + i)
 *   3. send_multi() of MANY frames (205: three headers), frame i of (i * 37) % 300 bytes, seed 30 + i
 *   4. send_obj() of OBJ_SIZES[k] bytes, seed 40 + k
 *   5. send() of 33 bytes (seed 50) with user tag -7; send() of 34 bytes (seed 51) with tag
 *      0xfeedfacecafebeef forced
 *   then ucxx-ts sends "DONE" with send(); this program prints OK.
 * SCENARIO bad-messages (after a correct handshake; this program sends, ucxx-ts must reject each):
 *   1. a 1208-byte message where recv_multi expects a header      4. a send_obj size of 2^40
 *   2. a header with nframes 101                                  5. a 4-byte message where the size is due
 *   3. a header announcing 2 frames of 1 MiB (above the limit)    6. a header for one 10-byte frame, then a 5-byte frame
 *   then ucxx-ts sends "DONE"; this program prints OK.
 * Failure scenarios (the handshake only; then this program waits up to WAIT_S for the peer to close the
 * connection, and prints "OK peer closed" or "OK peer still open"):
 *   bad-checksum    the checksum word is hash64bits(msg_tag) ^ 1
 *   truncated-stall only the first 8 bytes of the message are sent
 *   truncated-exit  only the first 8 bytes are sent, flushed, and the process exits at once (no close)
 *   silent          nothing is sent
 * The pattern (as in interop_peer.c): byte i of seed s is (uint8_t)((i * 131 + s * 7 + (i >> 8)) ^ (i >> 16)).
 */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 60
#define WAIT_S 10
#define STR(x) STR_(x)
#define STR_(x) #x

#define KiB 1024u
#define MiB (1024u * 1024u)
static const size_t SEND_SIZES[] = {0, 1, 8 * KiB + 3, 3 * MiB};
static const size_t MULTI_SIZES[] = {0, 1, 100, 64 * KiB, 5 * MiB + 1};
#define MANY 205
static const size_t OBJ_SIZES[] = {0, 17, 2 * MiB + 5};
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define USER_TAG (-7LL)
#define FORCED_TAG 0xfeedfacecafebeefull

#define HEADER_FRAMES 100
#define HEADER_BYTES (1 + 8 + HEADER_FRAMES * 4 + HEADER_FRAMES * 8)

typedef struct {
    volatile int done;
    ucs_status_t status;
    size_t length;
    ucp_tag_recv_info_t info;
} op_t;

static ucp_context_h context;
static ucp_worker_h worker;
static ucp_listener_h listener;
static ucp_ep_h ep;
static volatile ucp_conn_request_h conn_request;
static volatile int peer_gone;
static volatile int expect_close;
static const char *volatile phase = "start";
static uint64_t own_tag, peer_tag;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    printf("FAIL ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" (phase: %s)\n", phase);
    fflush(stdout);
    _exit(1);
}

static void on_alarm(int sig)
{
    static const char head[] = "FAIL timed out (SIGALRM: " STR(TIMEOUT_S) " s passed, or the test gave up) in phase: ";
    (void)sig;
    if (write(STDOUT_FILENO, head, sizeof(head) - 1) < 0) _exit(1);
    if (write(STDOUT_FILENO, phase, strlen(phase)) < 0) _exit(1);
    if (write(STDOUT_FILENO, "\n", 1) < 0) _exit(1);
    _exit(1);
}

/* ---- SHA-1 (FIPS 180-4) -------------------------------------------------------------------- */

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1(const uint8_t *data, size_t length, uint8_t digest[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t padded = ((length + 8) / 64 + 1) * 64;
    uint8_t *msg = calloc(padded, 1);
    if (msg == NULL) fail("out of memory");
    memcpy(msg, data, length);
    msg[length] = 0x80;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; i++) msg[padded - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t off = 0; off < padded; off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++) {
            const uint8_t *p = msg + off + 4 * i;
            w[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        }
        for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) { f = (b & c) | (~b & d); k = 0x5A827999; }
            else if (i < 40) { f = b ^ c ^ d; k = 0x6ED9EBA1; }
            else if (i < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8F1BBCDC; }
            else { f = b ^ c ^ d; k = 0xCA62C1D6; }
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d; d = c; c = rol(b, 30); b = a; a = t;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
    }
    free(msg);
    for (int i = 0; i < 5; i++) {
        digest[4 * i] = (uint8_t)(h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)h[i];
    }
}

/* hash64bits over an already formatted repr(args). */
static uint64_t hash64bits_repr(const char *repr)
{
    uint8_t digest[20];
    sha1((const uint8_t *)repr, strlen(repr), digest);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | digest[i];
    return v;
}

/* hash64bits(n) for one non-negative int: repr((n,)) is "(n,)". */
static uint64_t hash64bits_u64(uint64_t n)
{
    char repr[32];
    snprintf(repr, sizeof(repr), "(%llu,)", (unsigned long long)n);
    return hash64bits_repr(repr);
}

/* Python's hash() of an int in [-2^63, 2^63): modulo 2^61 - 1 keeping the sign, -1 -> -2. */
static long long py_hash(long long v)
{
    const unsigned long long p = (1ull << 61) - 1;
    unsigned long long mag = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    long long h = (long long)(mag % p);
    if (v < 0) h = -h;
    return h == -1 ? -2 : h;
}

/* The tag of a message with user tag t: hash64bits(msg_tag, hash(t)), repr "(msg_tag, hash)". */
static uint64_t user_tag(uint64_t base, long long t)
{
    char repr[64];
    snprintf(repr, sizeof(repr), "(%llu, %lld)", (unsigned long long)base, py_hash(t));
    return hash64bits_repr(repr);
}

/* msg_tag = hash64bits("msg_tag", seed, handle): repr ('msg_tag', b'...', handle). */
static uint64_t make_msg_tag(const uint8_t seed[16], uint64_t handle)
{
    int has_single = 0, has_double = 0;
    for (int i = 0; i < 16; i++) {
        if (seed[i] == '\'') has_single = 1;
        if (seed[i] == '"') has_double = 1;
    }
    char quote = has_single && !has_double ? '"' : '\'';
    char repr[128];
    size_t n = (size_t)snprintf(repr, sizeof(repr), "('msg_tag', b%c", quote);
    for (int i = 0; i < 16; i++) {
        uint8_t c = seed[i];
        if (c == (uint8_t)quote || c == '\\') n += (size_t)snprintf(repr + n, sizeof(repr) - n, "\\%c", c);
        else if (c == '\t') n += (size_t)snprintf(repr + n, sizeof(repr) - n, "\\t");
        else if (c == '\n') n += (size_t)snprintf(repr + n, sizeof(repr) - n, "\\n");
        else if (c == '\r') n += (size_t)snprintf(repr + n, sizeof(repr) - n, "\\r");
        else if (c < 0x20 || c >= 0x7f) n += (size_t)snprintf(repr + n, sizeof(repr) - n, "\\x%02x", c);
        else repr[n++] = (char)c;
    }
    snprintf(repr + n, sizeof(repr) - n, "%c, %llu)", quote, (unsigned long long)handle);
    return hash64bits_repr(repr);
}

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- the pattern --------------------------------------------------------------------------- */

static inline uint8_t pattern_byte(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131 + (size_t)seed * 7 + (i >> 8)) ^ (i >> 16));
}

static uint8_t *patterned(size_t length, unsigned seed)
{
    uint8_t *buffer = malloc(length + 1);
    if (buffer == NULL) fail("out of memory");
    for (size_t i = 0; i < length; i++) buffer[i] = pattern_byte(i, seed);
    return buffer;
}

static void verify(const uint8_t *buffer, size_t length, unsigned seed, const char *what, int k)
{
    for (size_t i = 0; i < length; i++) {
        uint8_t expected = pattern_byte(i, seed);
        if (buffer[i] != expected) {
            fail("%s %d (%zu bytes): byte %zu is 0x%02x, expected 0x%02x", what, k, length, i, buffer[i], expected);
        }
    }
}

/* ---- requests ------------------------------------------------------------------------------ */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    op->done = 1;
}

static void tag_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    if (status == UCS_OK) op->length = info->length;
    op->done = 1;
}

static void stream_recv_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    op->length = length;
    op->done = 1;
}

static void *track(ucs_status_ptr_t request, op_t *op, const char *what)
{
    if (request == NULL) {
        op->status = UCS_OK;
        op->done = 1;
        return NULL;
    }
    if (UCS_PTR_IS_ERR(request)) fail("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(request)));
    return request;
}

static void wait_op(void *request, op_t *op, const char *what)
{
    while (!op->done) ucp_worker_progress(worker);
    if (request != NULL) ucp_request_free(request);
    if (op->status != UCS_OK) fail("%s completed with %s", what, ucs_status_string(op->status));
}

/* A send in flight: its buffer is freed once it completes. */
typedef struct {
    void *request;
    op_t op;
    uint8_t *buffer;
} pending_t;

static pending_t *tag_send_start(uint8_t *buffer, size_t length, uint64_t tag)
{
    pending_t *p = calloc(1, sizeof(*p));
    if (p == NULL) fail("out of memory");
    p->buffer = buffer;
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = send_cb;
    param.user_data = &p->op;
    p->request = track(ucp_tag_send_nbx(ep, buffer, length, tag, &param), &p->op, "ucp_tag_send_nbx");
    return p;
}

static void tag_send_finish(pending_t *p)
{
    wait_op(p->request, &p->op, "tag send");
    free(p->buffer);
    free(p);
}

/* Receives one tag message into `buffer` (capacity bytes); returns its length. */
static size_t tag_recv(void *buffer, size_t capacity, uint64_t tag, const char *what)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = tag_recv_cb;
    param.user_data = &op;
    void *request = track(ucp_tag_recv_nbx(worker, buffer, capacity, tag, UINT64_MAX, &param), &op, "ucp_tag_recv_nbx");
    wait_op(request, &op, what);
    return op.length;
}

static void stream_send(const void *buffer, size_t length, const char *what)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = send_cb;
    param.user_data = &op;
    void *request = track(ucp_stream_send_nbx(ep, buffer, length, &param), &op, what);
    wait_op(request, &op, what);
}

static void stream_recv_all(void *buffer, size_t length, const char *what)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.recv_stream = stream_recv_cb;
    param.user_data = &op;
    param.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    size_t received = 0;
    void *request = track(ucp_stream_recv_nbx(ep, buffer, length, &received, &param), &op, what);
    if (request == NULL) op.length = received;
    wait_op(request, &op, what);
    if (op.length != length) fail("%s: WAITALL receive got %zu bytes, expected %zu", what, op.length, length);
}

static void flush_ep(void)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = send_cb;
    param.user_data = &op;
    void *request = track(ucp_ep_flush_nbx(ep, &param), &op, "ucp_ep_flush_nbx");
    wait_op(request, &op, "endpoint flush");
}

/* ---- connection ------------------------------------------------------------------------------ */

static void on_ep_error(void *arg, ucp_ep_h failed, ucs_status_t status)
{
    (void)arg;
    (void)failed;
    if (!expect_close) fail("endpoint error: %s", ucs_status_string(status));
    peer_gone = 1;
}

static void on_conn_request(ucp_conn_request_h request, void *arg)
{
    (void)arg;
    if (conn_request != NULL) {
        ucp_listener_reject(listener, request);
        return;
    }
    conn_request = request;
}

static void set_error_handling(ucp_ep_params_t *params)
{
    params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params->err_handler.cb = on_ep_error;
    params->err_handler.arg = NULL;
}

static void serve(void)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(0);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);

    ucp_listener_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = (const struct sockaddr *)&addr;
    params.sockaddr.addrlen = sizeof(addr);
    params.conn_handler.cb = on_conn_request;
    ucs_status_t status = ucp_listener_create(worker, &params, &listener);
    if (status != UCS_OK) fail("ucp_listener_create: %s", ucs_status_string(status));

    ucp_listener_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    status = ucp_listener_query(listener, &attr);
    if (status != UCS_OK) fail("ucp_listener_query: %s", ucs_status_string(status));
    printf("PORT %d\n", ntohs(((struct sockaddr_in *)&attr.sockaddr)->sin_port));
    fflush(stdout);

    phase = "accept";
    while (conn_request == NULL) ucp_worker_progress(worker);
    ucp_ep_params_t ep_params;
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep_params.conn_request = conn_request;
    set_error_handling(&ep_params);
    status = ucp_ep_create(worker, &ep_params, &ep);
    if (status != UCS_OK) fail("ucp_ep_create (connection request): %s", ucs_status_string(status));
}

static void connect_to(const char *host, const char *port_text)
{
    char *end;
    long port = strtol(port_text, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) fail("bad port '%s'", port_text);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) fail("bad IPv4 address '%s'", host);
    ucp_ep_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = (const struct sockaddr *)&addr;
    params.sockaddr.addrlen = sizeof(addr);
    set_error_handling(&params);
    phase = "connect";
    ucs_status_t status = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) fail("ucp_ep_create (%s:%ld): %s", host, port, ucs_status_string(status));
}

/* ---- the handshake --------------------------------------------------------------------------- */

enum scenario { FULL, BAD_MESSAGES, BAD_CHECKSUM, TRUNCATED_STALL, TRUNCATED_EXIT, SILENT };

static void random_bytes(uint8_t *out, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, out, n) != (ssize_t)n) fail("cannot read /dev/urandom");
    close(fd);
}

/* Sends this side's peer information, as the scenario says. */
static void send_info(enum scenario scenario, int server)
{
    uint8_t info[16];
    put_u64le(info, own_tag);
    put_u64le(info + 8, hash64bits_u64(own_tag) ^ (scenario == BAD_CHECKSUM ? 1 : 0));
    switch (scenario) {
    case SILENT:
        return;
    case TRUNCATED_STALL:
        stream_send(info, 8, "peer information (first 8 bytes)");
        return;
    case TRUNCATED_EXIT:
        stream_send(info, 8, "peer information (first 8 bytes)");
        flush_ep();
        printf("EXITING\n");
        fflush(stdout);
        _exit(0);
    default:
        stream_send(info, sizeof(info), server ? "peer information (listener: send)" : "peer information (client: send)");
    }
}

static void handshake(enum scenario scenario, int server)
{
    uint8_t seed[16];
    random_bytes(seed, sizeof(seed));
    own_tag = make_msg_tag(seed, (uint64_t)(uintptr_t)ep);
    uint8_t theirs[16];
    phase = "handshake";
    int valid = scenario == FULL || scenario == BAD_MESSAGES;
    if (server) {
        send_info(scenario, server);
        if (!valid) return;
        stream_recv_all(theirs, sizeof(theirs), "peer information (listener: receive)");
    } else {
        stream_recv_all(theirs, sizeof(theirs), "peer information (client: receive)");
        send_info(scenario, server);
        if (!valid) return;
    }
    peer_tag = get_u64le(theirs);
    uint64_t checksum = get_u64le(theirs + 8);
    uint64_t expected = hash64bits_u64(peer_tag);
    if (checksum != expected) {
        fail("peer information checksum 0x%016llx, expected 0x%016llx for tag 0x%016llx",
             (unsigned long long)checksum, (unsigned long long)expected, (unsigned long long)peer_tag);
    }
    printf("TAGS own=0x%016llx peer=0x%016llx\n", (unsigned long long)own_tag, (unsigned long long)peer_tag);
    fflush(stdout);
}

/* ---- ucxx Python's Endpoint, receiving (tag = own_tag) ---------------------------------------- */

static void recv_one(size_t size, unsigned seed, uint64_t tag, const char *what, int k)
{
    uint8_t *buffer = malloc(size + 64);
    if (buffer == NULL) fail("out of memory");
    size_t length = tag_recv(buffer, size + 64, tag, what);
    if (length != size) fail("%s %d: %zu bytes, expected %zu", what, k, length, size);
    verify(buffer, size, seed, what, k);
    free(buffer);
}

static void recv_multi(const size_t *sizes, size_t count, unsigned seed0, int step)
{
    size_t headers = (count + HEADER_FRAMES - 1) / HEADER_FRAMES;
    uint8_t header[HEADER_BYTES + 64];
    size_t *got = malloc(count * sizeof(size_t));
    if (got == NULL) fail("out of memory");
    size_t total = 0;
    for (size_t h = 0;; h++) {
        size_t length = tag_recv(header, sizeof(header), own_tag, "recv_multi header");
        if (length != HEADER_BYTES) fail("recv_multi %d header %zu: %zu bytes, expected %d", step, h, length, HEADER_BYTES);
        uint8_t next = header[0];
        uint64_t nframes = get_u64le(header + 1);
        if (next != (h + 1 < headers ? 1 : 0)) fail("recv_multi %d header %zu: next = %u", step, h, next);
        size_t expect_frames = h + 1 < headers ? HEADER_FRAMES : count - h * HEADER_FRAMES;
        if (nframes != expect_frames) fail("recv_multi %d header %zu: nframes %llu, expected %zu", step, h,
                                           (unsigned long long)nframes, expect_frames);
        for (int i = 0; i < HEADER_FRAMES; i++) {
            const uint8_t *cuda = header + 9 + 4 * i;
            if (cuda[0] | cuda[1] | cuda[2] | cuda[3]) fail("recv_multi %d header %zu: isCUDA[%d] is not 0", step, h, i);
            uint64_t size = get_u64le(header + 9 + 4 * HEADER_FRAMES + 8 * i);
            if ((uint64_t)i < nframes) got[total + (size_t)i] = (size_t)size;
            else if (size != 0) fail("recv_multi %d header %zu: unused size[%d] is %llu", step, h, i, (unsigned long long)size);
        }
        total += nframes;
        if (!next) break;
    }
    if (total != count) fail("recv_multi %d: %zu frames announced, expected %zu", step, total, count);
    for (size_t i = 0; i < count; i++) {
        if (got[i] != sizes[i]) fail("recv_multi %d: frame %zu announced as %zu bytes, expected %zu", step, i, got[i], sizes[i]);
        recv_one(sizes[i], seed0 + (unsigned)i, own_tag, "recv_multi frame", (int)i);
    }
    free(got);
}

static void recv_obj(size_t size, unsigned seed, int k)
{
    uint8_t prefix[16];
    size_t length = tag_recv(prefix, sizeof(prefix), own_tag, "recv_obj size");
    if (length != 8) fail("recv_obj %d: size message of %zu bytes, expected 8", k, length);
    if (get_u64le(prefix) != size) fail("recv_obj %d: size %llu, expected %zu", k, (unsigned long long)get_u64le(prefix), size);
    recv_one(size, seed, own_tag, "recv_obj payload", k);
}

/* ---- ucxx Python's Endpoint, sending (tag = peer_tag) ----------------------------------------- */

static void send_multi(const size_t *sizes, size_t count, unsigned seed0)
{
    size_t headers = (count + HEADER_FRAMES - 1) / HEADER_FRAMES;
    pending_t **pending = malloc((headers + count) * sizeof(pending_t *));
    if (pending == NULL) fail("out of memory");
    for (size_t h = 0; h < headers; h++) {
        uint8_t *header = calloc(1, HEADER_BYTES);
        if (header == NULL) fail("out of memory");
        size_t first = h * HEADER_FRAMES;
        size_t nframes = count - first < HEADER_FRAMES ? count - first : HEADER_FRAMES;
        header[0] = h + 1 < headers;
        put_u64le(header + 1, nframes);
        for (size_t i = 0; i < nframes; i++) put_u64le(header + 9 + 4 * HEADER_FRAMES + 8 * i, sizes[first + i]);
        pending[h] = tag_send_start(header, HEADER_BYTES, peer_tag);
    }
    for (size_t i = 0; i < count; i++) pending[headers + i] = tag_send_start(patterned(sizes[i], seed0 + (unsigned)i), sizes[i], peer_tag);
    for (size_t i = 0; i < headers + count; i++) tag_send_finish(pending[i]);
    free(pending);
}

static void send_obj(size_t size, unsigned seed)
{
    uint8_t *prefix = malloc(8);
    if (prefix == NULL) fail("out of memory");
    put_u64le(prefix, size);
    pending_t *a = tag_send_start(prefix, 8, peer_tag);
    pending_t *b = tag_send_start(patterned(size, seed), size, peer_tag);
    tag_send_finish(a);
    tag_send_finish(b);
}

static size_t many_sizes[MANY];

static void run_full(void)
{
    for (int i = 0; i < MANY; i++) many_sizes[i] = (size_t)(i * 37) % 300;

    phase = "A1: recv from ucxx-ts";
    for (size_t k = 0; k < N(SEND_SIZES); k++) recv_one(SEND_SIZES[k], 10 + (unsigned)k, own_tag, "recv", (int)k);
    phase = "A2: recv_multi from ucxx-ts";
    recv_multi(MULTI_SIZES, N(MULTI_SIZES), 20, 2);
    phase = "A3: recv_multi (205 frames) from ucxx-ts";
    recv_multi(many_sizes, MANY, 30, 3);
    phase = "A4: recv_obj from ucxx-ts";
    for (size_t k = 0; k < N(OBJ_SIZES); k++) recv_obj(OBJ_SIZES[k], 40 + (unsigned)k, (int)k);
    phase = "A5: tagged recv from ucxx-ts";
    recv_one(33, 50, user_tag(own_tag, USER_TAG), "recv (user tag -7)", 0);
    recv_one(34, 51, FORCED_TAG, "recv (forced tag)", 0);

    phase = "B: send to ucxx-ts";
    for (size_t k = 0; k < N(SEND_SIZES); k++) {
        tag_send_finish(tag_send_start(patterned(SEND_SIZES[k], 110 + (unsigned)k), SEND_SIZES[k], peer_tag));
    }
    send_multi(MULTI_SIZES, N(MULTI_SIZES), 120);
    send_multi(many_sizes, MANY, 130);
    for (size_t k = 0; k < N(OBJ_SIZES); k++) send_obj(OBJ_SIZES[k], 140 + (unsigned)k);
    tag_send_finish(tag_send_start(patterned(33, 150), 33, user_tag(peer_tag, USER_TAG)));
    tag_send_finish(tag_send_start(patterned(34, 151), 34, FORCED_TAG));

    phase = "C: wait for DONE";
    char done[16];
    size_t length = tag_recv(done, sizeof(done), own_tag, "DONE");
    if (length != 4 || memcmp(done, "DONE", 4) != 0) fail("bad acknowledgement (%zu bytes)", length);
    expect_close = 1;
}

/* Messages that break ucxx Python's framing, one after the other (see the top of the file). */
static void run_bad_messages(void)
{
    phase = "bad messages";
    uint8_t *bytes = calloc(1, HEADER_BYTES);
    if (bytes == NULL) fail("out of memory");
    tag_send_finish(tag_send_start(bytes, HEADER_BYTES - 1, peer_tag));           /* a short header */
    bytes = calloc(1, HEADER_BYTES);
    if (bytes == NULL) fail("out of memory");
    put_u64le(bytes + 1, HEADER_FRAMES + 1);                                         /* nframes 101 */
    tag_send_finish(tag_send_start(bytes, HEADER_BYTES, peer_tag));
    bytes = calloc(1, HEADER_BYTES);
    if (bytes == NULL) fail("out of memory");
    put_u64le(bytes + 1, 2);                                                         /* 2 x 1 MiB */
    put_u64le(bytes + 9 + 4 * HEADER_FRAMES, MiB);
    put_u64le(bytes + 9 + 4 * HEADER_FRAMES + 8, MiB);
    tag_send_finish(tag_send_start(bytes, HEADER_BYTES, peer_tag));
    bytes = calloc(1, 8);
    if (bytes == NULL) fail("out of memory");
    put_u64le(bytes, 1ull << 40);                                                    /* send_obj of 1 TiB */
    tag_send_finish(tag_send_start(bytes, 8, peer_tag));
    tag_send_finish(tag_send_start(patterned(4, 1), 4, peer_tag));                   /* a 4-byte size */
    bytes = calloc(1, HEADER_BYTES);
    if (bytes == NULL) fail("out of memory");
    put_u64le(bytes + 1, 1);                                                         /* 1 frame of 10 B... */
    put_u64le(bytes + 9 + 4 * HEADER_FRAMES, 10);
    tag_send_finish(tag_send_start(bytes, HEADER_BYTES, peer_tag));
    tag_send_finish(tag_send_start(patterned(5, 2), 5, peer_tag));                   /* ...that has 5 */

    phase = "bad messages: wait for DONE";
    char done[16];
    size_t length = tag_recv(done, sizeof(done), own_tag, "DONE");
    if (length != 4 || memcmp(done, "DONE", 4) != 0) fail("bad acknowledgement (%zu bytes)", length);
    expect_close = 1;
}

/* After a failure scenario: wait (bounded) for ucxx-ts to close the connection. */
static void wait_for_close(void)
{
    expect_close = 1;
    phase = "wait for the peer to close";
    time_t deadline = time(NULL) + WAIT_S;
    while (!peer_gone && time(NULL) < deadline) ucp_worker_progress(worker);
}

/* "selftest ARG...": prints this program's hashes for the test to compare with python3's vectors.
 * Each ARG is "int:N", "msgtag:SEEDHEX:HANDLE" or "usertag:BASE:T" (decimal numbers). */
static int selftest(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        char text[64];
        unsigned long long a, b;
        long long t;
        if (sscanf(argv[i], "int:%llu", &a) == 1) {
            printf("%s 0x%llx\n", argv[i], (unsigned long long)hash64bits_u64(a));
        } else if (sscanf(argv[i], "msgtag:%32[0-9a-f]:%llu", text, &a) == 2 && strlen(text) == 32) {
            uint8_t seed[16];
            for (int j = 0; j < 16; j++) {
                unsigned byte;
                sscanf(text + 2 * j, "%2x", &byte);
                seed[j] = (uint8_t)byte;
            }
            printf("%s 0x%llx\n", argv[i], (unsigned long long)make_msg_tag(seed, a));
        } else if (sscanf(argv[i], "usertag:%llu:%lld", &b, &t) == 2) {
            printf("%s 0x%llx\n", argv[i], (unsigned long long)user_tag(b, t));
        } else {
            fail("bad selftest argument '%s'", argv[i]);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(TIMEOUT_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "selftest") == 0) return selftest(argc, argv);

    int server = argc == 3 && strcmp(argv[1], "server") == 0;
    int client = argc == 5 && strcmp(argv[1], "client") == 0;
    if (!server && !client) {
        fprintf(stderr, "usage: ucxx_python_peer server SCENARIO | ucxx_python_peer client HOST PORT SCENARIO\n");
        printf("FAIL bad command line\n");
        return 1;
    }
    const char *name = argv[argc - 1];
    enum scenario scenario;
    if (strcmp(name, "full") == 0) scenario = FULL;
    else if (strcmp(name, "bad-messages") == 0) scenario = BAD_MESSAGES;
    else if (strcmp(name, "bad-checksum") == 0) scenario = BAD_CHECKSUM;
    else if (strcmp(name, "truncated-stall") == 0) scenario = TRUNCATED_STALL;
    else if (strcmp(name, "truncated-exit") == 0) scenario = TRUNCATED_EXIT;
    else if (strcmp(name, "silent") == 0) scenario = SILENT;
    else fail("unknown scenario '%s'", name);

    phase = "init";
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) fail("ucp_config_read: %s", ucs_status_string(status));
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_STREAM | UCP_FEATURE_AM | UCP_FEATURE_RMA;
    status = ucp_init_version(1, 13, &params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) fail("ucp_init: %s", ucs_status_string(status));
    ucp_worker_params_t worker_params;
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &worker_params, &worker);
    if (status != UCS_OK) fail("ucp_worker_create: %s", ucs_status_string(status));

    if (server) serve();
    else connect_to(argv[2], argv[3]);

    handshake(scenario, server);
    if (scenario == FULL) {
        run_full();
    } else if (scenario == BAD_MESSAGES) {
        run_bad_messages();
    } else {
        wait_for_close();
    }

    phase = "close";
    ucp_request_param_t close_param;
    memset(&close_param, 0, sizeof(close_param));
    if (peer_gone) {
        close_param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        close_param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    void *close_request = ucp_ep_close_nbx(ep, &close_param);
    if (close_request != NULL && !UCS_PTR_IS_ERR(close_request)) {
        time_t deadline = time(NULL) + 3;
        while (ucp_request_check_status(close_request) == UCS_INPROGRESS && time(NULL) < deadline) {
            ucp_worker_progress(worker);
        }
        if (ucp_request_check_status(close_request) != UCS_INPROGRESS) ucp_request_free(close_request);
    }
    if (listener != NULL) ucp_listener_destroy(listener);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);

    if (scenario == FULL || scenario == BAD_MESSAGES) printf("OK\n");
    else printf("OK peer %s\n", peer_gone ? "closed" : "still open");
    fflush(stdout);
    return 0;
}
