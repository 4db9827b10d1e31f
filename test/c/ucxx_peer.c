/*
 * ucxx_peer: ucxx's own wire protocols, tagMulti and active messages, implemented in plain C over libucp
 * (nothing else), written from ucxx's C++ sources and independently of ucxx-ts's TypeScript:
 *   - the tagMulti header: cpp/include/ucxx/header.h, cpp/src/header.cpp (`Header::serialize`,
 *     `deserialize`, `buildHeaders`); the sequence: cpp/src/request_tag_multi.cpp (`send`,
 *     `recvCallback`, `recvHeader`, `recvFrames`);
 *   - the AM header: cpp/src/request_am.cpp (`AmHeader::serialize`/`deserialize`, `recvCallback`),
 *     cpp/include/ucxx/typedefs.h (owner storage, ids, `AmSendMemoryTypePolicy`), cpp/src/worker.cpp
 *     (AM id 0, handler registration, the per-endpoint receive pool).
 * Driven by test/ucxx-interop.test.ts. Real ucxx needs a newer UCX than Debian 12's 1.13, so this
 * program stands in for a ucxx peer.
 *
 * Build:  gcc -O2 -Wall -Wextra ucxx_peer.c -o ucxx_peer -lucp -lucs
 * Usage:  ucxx_peer server SCENARIO ARG...             listen on 127.0.0.1, port 0; print "PORT <n>"
 *         ucxx_peer client HOST PORT SCENARIO ARG...   connect to HOST:PORT
 *         ucxx_peer dump-tag-multi FRAME...            print each tagMulti header ("HEADER <hex>")
 *         ucxx_peer dump-am MEMTYPE POLICY OWNER|- ID USERHEADER_HEX|-   print an AM header ("AM <hex>")
 * FRAME is a size in bytes, or COUNTxSIZE for COUNT frames of SIZE bytes.
 * Result: "OK ..." on stdout and exit 0, or one "FAIL <what>" line and exit 1; an alarm ends it with
 * "FAIL timed out ... in phase: <phase>" (the test sends SIGALRM when it gives up).
 *
 * Pattern (as in test/ucxx-interop.test.ts): byte i with seed s is (uint8_t)((i*131 + s*7 + (i>>8)) ^ (i>>16)).
 *
 * Scenarios (every endpoint in UCP_ERR_HANDLING_MODE_PEER; the last step is always: ucxx-ts sends the
 * 4 bytes "DONE" as a plain tag message with tag TAG_ACK, this program closes and prints OK):
 *   tagmulti FRAME...  ucxx-ts tagMulti-sends the frames (frame i: pattern seed 1000 + i) with tag
 *                      TAG_TS_TO_C; this program receives them as ucxx does (header after header,
 *                      then one receive per frame, full mask) and checks count, sizes and every byte.
 *                      Then it tagMulti-sends the same sizes (seed 2000 + i) with TAG_C_TO_TS.
 *   am SIZE...         ucxx-ts sends message k = 0..N-1 as a ucxx AM: data SIZE[k] bytes of seed 3000 + k;
 *                      a user header of 8 + k bytes of seed 3500 + k when k is odd; receiver-callback
 *                      info {owner "ucxx-ts-test", id 0x1000 + k} when k % 3 == 1. Then two more,
 *                      k = N and N + 1: 1 MiB by rendezvous, memory type 1 (CUDA), policy
 *                      errorOnUnsupported (this program, with a host allocator only, refuses it with
 *                      UCS_ERR_UNSUPPORTED, as ucxx does) and fallbackToHost (received into host
 *                      memory). Messages without receiver-callback info go to the endpoint's queue in
 *                      arrival order (ucxx's amRecv pool); the others to the named callback. Then this
 *                      program sends the same set (seeds 4000 + k, 4500 + k) and checks that its
 *                      message N failed with UCS_ERR_UNSUPPORTED and the others succeeded.
 *   malformed          this program sends, with tag TAG_BAD: a header with nframes 101; a 100-byte
 *                      message; a header announcing one 10-byte frame then a 20-byte frame; one
 *                      announcing 20 bytes then a 10-byte frame; twice a header marking its 8-byte
 *                      frame isCUDA, with the frame; a valid 2-frame message (5 and 3 bytes, seeds 1, 2).
 *                      Then ucxx AMs: one whose receiver-callback flag is 2, one whose user-header size
 *                      is 1 more than the bytes that follow, and a valid one (user header "ok", data
 *                      "data").
 */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 60
#define STR(x) STR_(x)
#define STR_(x) #x

#define TAG_TS_TO_C 0x7563787800000001ull
#define TAG_C_TO_TS 0x7563787800000142ull
#define TAG_BAD 0x75637878000bad00ull
#define TAG_ACK 0xacacacacacacacacull

/* ucxx's HeaderFramesSize and the serialized Header: bool next, size_t nframes, int isCUDA[100],
 * size_t size[100], written one after the other (std::stringstream::write, no padding). */
#define HEADER_FRAMES 100
#define HEADER_SIZE (sizeof(bool) + sizeof(size_t) + HEADER_FRAMES * sizeof(int) + HEADER_FRAMES * sizeof(size_t))
_Static_assert(sizeof(bool) == 1 && sizeof(size_t) == 8 && sizeof(int) == 4, "ucxx's layout assumes LP64");
_Static_assert(sizeof(ucs_memory_type_t) == 4, "ucs_memory_type_t is a 4-byte enum");

/* ucxx's AM: id 0; owner names in 64 bytes (63 characters + NUL padding); u64 ids. */
#define AM_ID 0
#define OWNER_SIZE 64
#define OWNER "ucxx-ts-test"
#define CALLBACK_ID_BASE 0x1000u
#define POLICY_FALLBACK 0
#define POLICY_ERROR 1
#define EXTRA_SIZE (1u << 20)
#define MAX_AMS 64
#define MAX_FRAMES 4096

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
static volatile int acked;
static const char *volatile phase = "start";

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

static void *xmalloc(size_t n)
{
    void *p = malloc(n == 0 ? 1 : n);
    if (p == NULL) fail("out of memory (%zu bytes)", n);
    return p;
}

static inline uint8_t pattern_byte(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131 + (size_t)seed * 7 + (i >> 8)) ^ (i >> 16));
}

static uint8_t *pattern(size_t length, unsigned seed)
{
    uint8_t *p = xmalloc(length);
    for (size_t i = 0; i < length; i++) p[i] = pattern_byte(i, seed);
    return p;
}

static void verify(const uint8_t *buffer, size_t length, unsigned seed, const char *what, int k)
{
    for (size_t i = 0; i < length; i++) {
        if (buffer[i] != pattern_byte(i, seed)) {
            fail("%s %d (%zu bytes): byte %zu is 0x%02x, expected 0x%02x", what, k, length, i, buffer[i],
                 pattern_byte(i, seed));
        }
    }
}

static void print_hex(const char *label, const uint8_t *bytes, size_t length)
{
    printf("%s ", label);
    for (size_t i = 0; i < length; i++) printf("%02x", bytes[i]);
    printf("\n");
}

/* ---- requests ---------------------------------------------------------------------------------- */

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
    if (status == UCS_OK) {
        op->info = *info;
        op->length = info->length;
    }
    op->done = 1;
}

static void length_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    op->length = length;
    op->done = 1;
}

/* NULL (done at once), an error, or a request that the callback completes. */
static void *track(ucs_status_ptr_t request, op_t *op, const char *what)
{
    if (request == NULL) {
        op->status = UCS_OK;
        op->done = 1;
        return NULL;
    }
    if (UCS_PTR_IS_ERR(request)) {
        op->status = UCS_PTR_STATUS(request);
        op->done = 1;
        (void)what;
        return NULL;
    }
    return request;
}

static void wait_done(void *request, op_t *op)
{
    while (!op->done) ucp_worker_progress(worker);
    if (request != NULL) ucp_request_free(request);
}

static void *tag_send(const void *buffer, size_t length, uint64_t tag, op_t *op)
{
    memset(op, 0, sizeof(*op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = send_cb;
    param.user_data = op;
    return track(ucp_tag_send_nbx(ep, buffer, length, tag, &param), op, "ucp_tag_send_nbx");
}

static void *tag_recv(void *buffer, size_t length, uint64_t tag, uint64_t mask, op_t *op)
{
    memset(op, 0, sizeof(*op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    /* NO_IMM_CMPL: the callback, not recv_info, reports the length. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = tag_recv_cb;
    param.user_data = op;
    return track(ucp_tag_recv_nbx(worker, buffer, length, tag, mask, &param), op, "ucp_tag_recv_nbx");
}

static void tag_send_blocking(const void *buffer, size_t length, uint64_t tag, const char *what)
{
    op_t op;
    void *request = tag_send(buffer, length, tag, &op);
    wait_done(request, &op);
    if (op.status != UCS_OK) fail("%s: %s", what, ucs_status_string(op.status));
}

/* ---- the tagMulti header (ucxx::Header) ------------------------------------------------------- */

typedef struct {
    bool next;
    size_t nframes;
    int is_cuda[HEADER_FRAMES];
    size_t size[HEADER_FRAMES];
} header_t;

/* Header::serialize: the four members in order, each with its own size. */
static void header_serialize(const header_t *h, uint8_t *out)
{
    size_t at = 0;
    memcpy(out + at, &h->next, sizeof(h->next));
    at += sizeof(h->next);
    memcpy(out + at, &h->nframes, sizeof(h->nframes));
    at += sizeof(h->nframes);
    for (int i = 0; i < HEADER_FRAMES; i++, at += sizeof(int)) memcpy(out + at, &h->is_cuda[i], sizeof(int));
    for (int i = 0; i < HEADER_FRAMES; i++, at += sizeof(size_t)) memcpy(out + at, &h->size[i], sizeof(size_t));
    if (at != HEADER_SIZE) fail("header_serialize wrote %zu bytes", at);
}

static void header_deserialize(const uint8_t *in, header_t *h)
{
    size_t at = 0;
    uint8_t next;
    memcpy(&next, in + at, 1);
    if (next > 1) fail("tagMulti header: next is %u", next);
    h->next = next == 1;
    at += 1;
    memcpy(&h->nframes, in + at, sizeof(size_t));
    at += sizeof(size_t);
    if (h->nframes > HEADER_FRAMES) fail("tagMulti header: nframes %zu exceeds %d", h->nframes, HEADER_FRAMES);
    for (int i = 0; i < HEADER_FRAMES; i++, at += sizeof(int)) memcpy(&h->is_cuda[i], in + at, sizeof(int));
    for (int i = 0; i < HEADER_FRAMES; i++, at += sizeof(size_t)) memcpy(&h->size[i], in + at, sizeof(size_t));
}

/* Header::buildHeaders: ceil(n / 100) headers, all but the last full and marked next. */
static int build_headers(const size_t *sizes, const int *is_cuda, size_t n, uint8_t (*out)[HEADER_SIZE])
{
    size_t total_headers = (n + HEADER_FRAMES - 1) / HEADER_FRAMES;
    for (size_t i = 0; i < total_headers; i++) {
        header_t h;
        memset(&h, 0, sizeof(h));
        h.next = n > (i + 1) * HEADER_FRAMES;
        h.nframes = h.next ? HEADER_FRAMES : HEADER_FRAMES - (HEADER_FRAMES * (i + 1) - n);
        for (size_t j = 0; j < h.nframes; j++) {
            h.is_cuda[j] = is_cuda == NULL ? 0 : is_cuda[i * HEADER_FRAMES + j];
            h.size[j] = sizes[i * HEADER_FRAMES + j];
        }
        header_serialize(&h, out[i]);
    }
    return (int)total_headers;
}

/* RequestTagMulti::send: every header, then every frame, all with one tag; done when all are. */
static void tag_multi_send(uint8_t **frames, const size_t *sizes, size_t n, uint64_t tag)
{
    uint8_t (*headers)[HEADER_SIZE] = xmalloc(((n + HEADER_FRAMES - 1) / HEADER_FRAMES) * HEADER_SIZE);
    int nheaders = build_headers(sizes, NULL, n, headers);
    size_t total = (size_t)nheaders + n;
    op_t *ops = xmalloc(total * sizeof(op_t));
    void **requests = xmalloc(total * sizeof(void *));
    for (int i = 0; i < nheaders; i++) requests[i] = tag_send(headers[i], HEADER_SIZE, tag, &ops[i]);
    for (size_t i = 0; i < n; i++) requests[nheaders + i] = tag_send(frames[i], sizes[i], tag, &ops[nheaders + i]);
    for (size_t i = 0; i < total; i++) {
        wait_done(requests[i], &ops[i]);
        if (ops[i].status != UCS_OK) fail("tagMulti send part %zu: %s", i, ucs_status_string(ops[i].status));
    }
    free(requests);
    free(ops);
    free(headers);
}

/* RequestTagMulti's receive: header-sized receives while `next`, then one receive per frame. */
static size_t tag_multi_recv(uint64_t tag, uint64_t mask, uint8_t ***frames_out, size_t **sizes_out)
{
    size_t n = 0;
    size_t *sizes = xmalloc(MAX_FRAMES * sizeof(size_t));
    for (;;) {
        uint8_t buffer[HEADER_SIZE];
        op_t op;
        void *request = tag_recv(buffer, sizeof(buffer), tag, mask, &op);
        wait_done(request, &op);
        if (op.status != UCS_OK) fail("tagMulti header receive: %s", ucs_status_string(op.status));
        if (op.length != HEADER_SIZE) fail("tagMulti header of %zu bytes, expected %zu", op.length, (size_t)HEADER_SIZE);
        header_t h;
        header_deserialize(buffer, &h);
        for (size_t i = 0; i < h.nframes; i++) {
            if (h.is_cuda[i] != 0) fail("tagMulti frame %zu is marked isCUDA %d", n, h.is_cuda[i]);
            if (n == MAX_FRAMES) fail("more than %d frames", MAX_FRAMES);
            sizes[n++] = h.size[i];
        }
        for (size_t i = h.nframes; i < HEADER_FRAMES; i++) {
            if (h.is_cuda[i] != 0 || h.size[i] != 0) fail("tagMulti header slot %zu past nframes is not zero", i);
        }
        if (!h.next) break;
        if (h.nframes != HEADER_FRAMES) fail("tagMulti header with next and %zu frames", h.nframes);
    }
    uint8_t **frames = xmalloc((n + 1) * sizeof(uint8_t *));
    op_t *ops = xmalloc((n + 1) * sizeof(op_t));
    void **requests = xmalloc((n + 1) * sizeof(void *));
    for (size_t i = 0; i < n; i++) {
        frames[i] = xmalloc(sizes[i]);
        requests[i] = tag_recv(frames[i], sizes[i], tag, mask, &ops[i]);
    }
    for (size_t i = 0; i < n; i++) {
        wait_done(requests[i], &ops[i]);
        if (ops[i].status != UCS_OK) fail("tagMulti frame %zu receive: %s", i, ucs_status_string(ops[i].status));
        if (ops[i].length != sizes[i]) fail("tagMulti frame %zu: %zu bytes, announced %zu", i, ops[i].length, sizes[i]);
    }
    free(requests);
    free(ops);
    *frames_out = frames;
    *sizes_out = sizes;
    return n;
}

/* ---- the AM header (ucxx's AmHeader) ---------------------------------------------------------- */

typedef struct {
    ucs_memory_type_t memory_type;
    uint8_t policy;
    bool has_callback;
    char owner[OWNER_SIZE];
    uint64_t id;
    const uint8_t *user_header;
    size_t user_header_size;
} am_header_t;

/* AmHeader::serialize: memory type, hasReceiverCallback, [owner storage, id], policy (u8),
 * user-header size (size_t), user header. */
static uint8_t *am_header_serialize(const am_header_t *h, size_t *length)
{
    size_t total = sizeof(h->memory_type) + sizeof(h->has_callback) +
                   (h->has_callback ? OWNER_SIZE + sizeof(h->id) : 0) + sizeof(h->policy) + sizeof(size_t) +
                   h->user_header_size;
    uint8_t *out = xmalloc(total);
    size_t at = 0;
    memcpy(out + at, &h->memory_type, sizeof(h->memory_type));
    at += sizeof(h->memory_type);
    memcpy(out + at, &h->has_callback, sizeof(h->has_callback));
    at += sizeof(h->has_callback);
    if (h->has_callback) {
        memcpy(out + at, h->owner, OWNER_SIZE);
        at += OWNER_SIZE;
        memcpy(out + at, &h->id, sizeof(h->id));
        at += sizeof(h->id);
    }
    memcpy(out + at, &h->policy, sizeof(h->policy));
    at += sizeof(h->policy);
    memcpy(out + at, &h->user_header_size, sizeof(size_t));
    at += sizeof(size_t);
    if (h->user_header_size > 0) memcpy(out + at, h->user_header, h->user_header_size);
    at += h->user_header_size;
    *length = at;
    return out;
}

/* AmHeader::deserialize, with bounds checks ucxx leaves out. Returns 0, or -1 when malformed. */
static int am_header_deserialize(const uint8_t *in, size_t length, am_header_t *h)
{
    memset(h, 0, sizeof(*h));
    size_t at = 0;
    if (length < 5) return -1;
    memcpy(&h->memory_type, in, sizeof(h->memory_type));
    at += sizeof(h->memory_type);
    uint8_t has = in[at++];
    if (has > 1) return -1;
    h->has_callback = has == 1;
    if (h->has_callback) {
        if (length < at + OWNER_SIZE + sizeof(uint64_t)) return -1;
        memcpy(h->owner, in + at, OWNER_SIZE);
        at += OWNER_SIZE;
        memcpy(&h->id, in + at, sizeof(uint64_t));
        at += sizeof(uint64_t);
    }
    h->policy = POLICY_FALLBACK;
    if (at + 1 <= length) h->policy = in[at++];
    if (at + sizeof(size_t) <= length) {
        size_t size;
        memcpy(&size, in + at, sizeof(size_t));
        at += sizeof(size_t);
        if (size > length - at) return -1;
        h->user_header = in + at;
        h->user_header_size = size;
        at += size;
    }
    return at == length ? 0 : -1;
}

/* ---- connection ------------------------------------------------------------------------------ */

static void on_ep_error(void *arg, ucp_ep_h failed, ucs_status_t status)
{
    (void)arg;
    (void)failed;
    if (!acked) fail("endpoint error: %s", ucs_status_string(status));
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

static void wait_ack(void)
{
    phase = "wait for the acknowledgement";
    uint8_t ack[16];
    op_t op;
    void *request = tag_recv(ack, sizeof(ack), TAG_ACK, UINT64_MAX, &op);
    wait_done(request, &op);
    if (op.status != UCS_OK) fail("ack receive: %s", ucs_status_string(op.status));
    if (op.length != 4 || memcmp(ack, "DONE", 4) != 0) fail("bad acknowledgement (%zu bytes)", op.length);
    acked = 1;
}

/* ---- frame lists ------------------------------------------------------------------------------ */

static size_t frame_sizes[MAX_FRAMES];
static size_t frame_count;

static void parse_frames(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        char *end;
        unsigned long long count = 1, size = strtoull(argv[i], &end, 10);
        if (*end == 'x') {
            count = size;
            size = strtoull(end + 1, &end, 10);
        }
        if (*end != '\0' || argv[i][0] == '-' || size > 0xffffffffull) fail("bad frame '%s'", argv[i]);
        for (unsigned long long j = 0; j < count; j++) {
            if (frame_count == MAX_FRAMES) fail("more than %d frames", MAX_FRAMES);
            frame_sizes[frame_count++] = (size_t)size;
        }
    }
}

/* ---- scenario: tagmulti ---------------------------------------------------------------------- */

static void run_tag_multi(void)
{
    phase = "tagmulti: receive from ucxx-ts";
    uint8_t **frames;
    size_t *sizes;
    size_t n = tag_multi_recv(TAG_TS_TO_C, UINT64_MAX, &frames, &sizes);
    if (n != frame_count) fail("tagMulti from ucxx-ts: %zu frames, expected %zu", n, frame_count);
    for (size_t i = 0; i < n; i++) {
        if (sizes[i] != frame_sizes[i]) fail("tagMulti frame %zu: %zu bytes, expected %zu", i, sizes[i], frame_sizes[i]);
        verify(frames[i], sizes[i], 1000 + (unsigned)i, "tagMulti frame from ucxx-ts", (int)i);
        free(frames[i]);
    }
    free(frames);
    free(sizes);

    phase = "tagmulti: send to ucxx-ts";
    uint8_t **out = xmalloc((frame_count + 1) * sizeof(uint8_t *));
    for (size_t i = 0; i < frame_count; i++) out[i] = pattern(frame_sizes[i], 2000 + (unsigned)i);
    tag_multi_send(out, frame_sizes, frame_count, TAG_C_TO_TS);
    for (size_t i = 0; i < frame_count; i++) free(out[i]);
    free(out);
    wait_ack();
}

/* ---- scenario: am ---------------------------------------------------------------------------- */

typedef struct {
    int arrived;
    am_header_t header;
    uint8_t *user_header;
    uint8_t *data;
    size_t length;
    int rndv;
    ucs_status_t status; /* of the receive: UCS_INPROGRESS until the data is here */
    op_t op;
    void *request;
} am_entry_t;

static size_t am_sizes[MAX_AMS];
static int am_count;          /* N: the messages from the command line; N + 2 with the extras */
static am_entry_t queue[MAX_AMS];          /* the endpoint's receive pool, in arrival order */
static int queued;
static am_entry_t callback_entries[MAX_AMS]; /* by k, for messages naming the receiver callback */

static int has_callback(int k) { return k < am_count && k % 3 == 1; }
static size_t user_header_length(int k) { return k < am_count && k % 2 == 1 ? 8 + (size_t)k : 0; }
static size_t message_size(int k) { return k < am_count ? am_sizes[k] : EXTRA_SIZE; }

static void am_recv_data_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    length_cb(request, status, length, user_data);
}

/* RequestAm::recvCallback: decode, pick the receiver callback or the endpoint's pool, then receive
 * (eager: copy; rendezvous: host allocation unless the policy forbids falling back to host). */
static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    (void)arg;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) fail("AM without a reply endpoint");
    if (param->reply_ep != ep) fail("AM reply endpoint %p is not the connection's endpoint %p", (void *)param->reply_ep, (void *)ep);
    am_header_t h;
    if (am_header_deserialize(header, header_length, &h) != 0) fail("malformed AM header (%zu bytes) from ucxx-ts", header_length);
    am_entry_t *entry;
    if (h.has_callback) {
        char expected[OWNER_SIZE];
        memset(expected, 0, sizeof(expected));
        strcpy(expected, OWNER);
        if (memcmp(h.owner, expected, OWNER_SIZE) != 0) fail("AM for an unknown receiver-callback owner");
        if (h.id < CALLBACK_ID_BASE || h.id >= CALLBACK_ID_BASE + MAX_AMS) fail("AM for unknown callback id %lu", (unsigned long)h.id);
        entry = &callback_entries[h.id - CALLBACK_ID_BASE];
        if (entry->arrived) fail("callback AM %lu arrived twice", (unsigned long)h.id);
    } else {
        if (queued == MAX_AMS) fail("too many AMs");
        entry = &queue[queued++];
    }
    entry->arrived = 1;
    entry->header = h;
    entry->user_header = xmalloc(h.user_header_size);
    memcpy(entry->user_header, h.user_header, h.user_header_size);
    entry->header.user_header = entry->user_header;
    entry->length = length;
    entry->rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (entry->rndv) {
        if (h.memory_type != UCS_MEMORY_TYPE_HOST && h.policy == POLICY_ERROR) {
            entry->status = UCS_ERR_UNSUPPORTED;
            return UCS_ERR_UNSUPPORTED;
        }
        entry->data = xmalloc(length);
        entry->status = UCS_INPROGRESS;
        ucp_request_param_t rp;
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv_am = am_recv_data_cb;
        rp.user_data = &entry->op;
        ucs_status_ptr_t request = ucp_am_recv_data_nbx(worker, data, entry->data, length, &rp);
        if (UCS_PTR_IS_ERR(request)) fail("ucp_am_recv_data_nbx: %s", ucs_status_string(UCS_PTR_STATUS(request)));
        if (request == NULL) {
            entry->op.status = UCS_OK;
            entry->op.length = length;
            entry->op.done = 1;
        }
        entry->request = request;
        return UCS_INPROGRESS;
    }
    entry->data = xmalloc(length);
    if (length > 0) memcpy(entry->data, data, length);
    entry->status = UCS_OK;
    return UCS_OK;
}

static void set_am_handler(void)
{
    /* As ucxx's Worker: id 0, no flags. */
    ucp_am_handler_param_t param;
    memset(&param, 0, sizeof(param));
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id = AM_ID;
    param.cb = on_am;
    ucs_status_t status = ucp_worker_set_am_recv_handler(worker, &param);
    if (status != UCS_OK) fail("ucp_worker_set_am_recv_handler: %s", ucs_status_string(status));
}

static void settle(am_entry_t *entry)
{
    if (entry->status == UCS_INPROGRESS && entry->op.done) {
        if (entry->request != NULL) ucp_request_free(entry->request);
        entry->request = NULL;
        entry->status = entry->op.status;
        if (entry->status == UCS_OK && entry->op.length != entry->length) {
            fail("rendezvous AM: %zu bytes received of %zu", entry->op.length, entry->length);
        }
    }
}

static void check_entry(am_entry_t *e, int k)
{
    size_t uh = user_header_length(k);
    int extra = k >= am_count;
    if (e->header.memory_type != (extra ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST)) {
        fail("AM %d: memory type %d", k, (int)e->header.memory_type);
    }
    uint8_t policy = k == am_count ? POLICY_ERROR : POLICY_FALLBACK;
    if (e->header.policy != policy) fail("AM %d: policy %u, expected %u", k, e->header.policy, policy);
    if (e->header.has_callback != has_callback(k)) fail("AM %d: receiver-callback flag %d", k, e->header.has_callback);
    if (e->header.user_header_size != uh) fail("AM %d: user header of %zu bytes, expected %zu", k, e->header.user_header_size, uh);
    verify(e->user_header, uh, 3500 + (unsigned)k, "AM user header", k);
    if (e->length != message_size(k)) fail("AM %d: %zu bytes, expected %zu", k, e->length, message_size(k));
    if (extra && !e->rndv) fail("AM %d: expected rendezvous", k);
    if (k == am_count) {
        if (e->status != UCS_ERR_UNSUPPORTED) fail("AM %d: status %s, expected UCS_ERR_UNSUPPORTED", k, ucs_status_string(e->status));
        return;
    }
    if (e->status != UCS_OK) fail("AM %d: receive status %s", k, ucs_status_string(e->status));
    verify(e->data, e->length, 3000 + (unsigned)k, "AM data", k);
}

static void run_am(void)
{
    int total = am_count + 2;
    int expected_queued = 0;
    for (int k = 0; k < total; k++) expected_queued += !has_callback(k);

    phase = "am: receive from ucxx-ts";
    for (;;) {
        int pending = queued < expected_queued;
        for (int k = 0; k < total; k++) {
            if (has_callback(k)) {
                am_entry_t *e = &callback_entries[k];
                settle(e);
                if (!e->arrived || e->status == UCS_INPROGRESS) pending = 1;
            }
        }
        for (int j = 0; j < queued; j++) {
            settle(&queue[j]);
            if (queue[j].status == UCS_INPROGRESS) pending = 1;
        }
        if (!pending) break;
        ucp_worker_progress(worker);
    }
    if (queued != expected_queued) fail("%d AMs in the endpoint's pool, expected %d", queued, expected_queued);
    int j = 0;
    for (int k = 0; k < total; k++) {
        if (has_callback(k)) {
            if (callback_entries[k].header.id != CALLBACK_ID_BASE + (unsigned)k) fail("callback AM %d: wrong id", k);
            check_entry(&callback_entries[k], k);
        } else {
            check_entry(&queue[j++], k); /* the pool keeps arrival order: the order ucxx-ts sent them */
        }
    }

    phase = "am: send to ucxx-ts";
    uint8_t *datas[MAX_AMS], *headers[MAX_AMS], *user_headers[MAX_AMS];
    void *requests[MAX_AMS];
    op_t ops[MAX_AMS];
    for (int k = 0; k < total; k++) {
        am_header_t h;
        memset(&h, 0, sizeof(h));
        h.memory_type = k >= am_count ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
        h.policy = k == am_count ? POLICY_ERROR : POLICY_FALLBACK;
        h.has_callback = has_callback(k);
        if (h.has_callback) {
            strcpy(h.owner, OWNER);
            h.id = CALLBACK_ID_BASE + (unsigned)k;
        }
        user_headers[k] = pattern(user_header_length(k), 4500 + (unsigned)k);
        h.user_header = user_headers[k];
        h.user_header_size = user_header_length(k);
        size_t header_length;
        headers[k] = am_header_serialize(&h, &header_length);
        datas[k] = pattern(message_size(k), 4000 + (unsigned)k);
        memset(&ops[k], 0, sizeof(ops[k]));
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
        param.cb.send = send_cb;
        param.user_data = &ops[k];
        param.flags = UCP_AM_SEND_FLAG_REPLY | (k >= am_count ? UCP_AM_SEND_FLAG_RNDV : 0);
        requests[k] = track(ucp_am_send_nbx(ep, AM_ID, headers[k], header_length, datas[k], message_size(k), &param),
                            &ops[k], "ucp_am_send_nbx");
    }
    for (int k = 0; k < total; k++) {
        wait_done(requests[k], &ops[k]);
        ucs_status_t expected = k == am_count ? UCS_ERR_UNSUPPORTED : UCS_OK;
        if (ops[k].status != expected) {
            fail("AM %d to ucxx-ts completed with %s, expected %s", k, ucs_status_string(ops[k].status),
                 ucs_status_string(expected));
        }
        free(datas[k]);
        free(headers[k]);
        free(user_headers[k]);
    }
    wait_ack();
}

/* ---- scenario: malformed --------------------------------------------------------------------- */

static void send_header(const header_t *h)
{
    uint8_t bytes[HEADER_SIZE];
    header_serialize(h, bytes);
    tag_send_blocking(bytes, sizeof(bytes), TAG_BAD, "malformed header send");
}

static void send_one_frame_message(size_t announced, size_t sent, int is_cuda)
{
    header_t h;
    memset(&h, 0, sizeof(h));
    h.nframes = 1;
    h.size[0] = announced;
    h.is_cuda[0] = is_cuda;
    send_header(&h);
    uint8_t *frame = pattern(sent, 7);
    tag_send_blocking(frame, sent, TAG_BAD, "frame send");
    free(frame);
}

static void send_raw_am(const uint8_t *header, size_t header_length, const void *data, size_t length)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = send_cb;
    param.user_data = &op;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    void *request = track(ucp_am_send_nbx(ep, AM_ID, header, header_length, data, length, &param), &op, "ucp_am_send_nbx");
    wait_done(request, &op);
    if (op.status != UCS_OK) fail("malformed AM send: %s", ucs_status_string(op.status));
}

static void run_malformed(void)
{
    phase = "malformed: tagMulti";
    header_t h;
    memset(&h, 0, sizeof(h));
    h.nframes = 101;
    send_header(&h);
    uint8_t small[100];
    memset(small, 0x5a, sizeof(small));
    tag_send_blocking(small, sizeof(small), TAG_BAD, "100-byte send");
    send_one_frame_message(10, 20, 0);
    send_one_frame_message(20, 10, 0);
    send_one_frame_message(8, 8, 1);
    send_one_frame_message(8, 8, 1);
    uint8_t *frames[2] = {pattern(5, 1), pattern(3, 2)};
    size_t sizes[2] = {5, 3};
    tag_multi_send(frames, sizes, 2, TAG_BAD);
    free(frames[0]);
    free(frames[1]);

    phase = "malformed: AM";
    am_header_t a;
    memset(&a, 0, sizeof(a));
    static const uint8_t ok[2] = {'o', 'k'};
    a.user_header = ok;
    a.user_header_size = 2;
    size_t length;
    uint8_t *bytes = am_header_serialize(&a, &length);
    bytes[4] = 2; /* hasReceiverCallback */
    send_raw_am(bytes, length, "data", 4);
    bytes[4] = 0;
    size_t announced = 3;
    memcpy(bytes + length - 2 - sizeof(size_t), &announced, sizeof(size_t));
    send_raw_am(bytes, length, "data", 4);
    free(bytes);
    bytes = am_header_serialize(&a, &length);
    send_raw_am(bytes, length, "data", 4);
    free(bytes);
    wait_ack();
}

/* ---- dumps, for byte-for-byte comparison of the encoders -------------------------------------- */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail("bad hex digit '%c'", c);
}

static void dump_am(char **argv)
{
    am_header_t h;
    memset(&h, 0, sizeof(h));
    h.memory_type = (ucs_memory_type_t)strtoul(argv[0], NULL, 10);
    h.policy = (uint8_t)strtoul(argv[1], NULL, 10);
    if (strcmp(argv[2], "-") != 0) {
        if (strlen(argv[2]) > OWNER_SIZE - 1) fail("owner too long");
        h.has_callback = true;
        strcpy(h.owner, argv[2]);
        h.id = strtoull(argv[3], NULL, 0);
    }
    static uint8_t user[4096];
    if (strcmp(argv[4], "-") != 0) {
        size_t n = strlen(argv[4]) / 2;
        if (n > sizeof(user)) fail("user header too long");
        for (size_t i = 0; i < n; i++) user[i] = (uint8_t)(hex_value(argv[4][2 * i]) * 16 + hex_value(argv[4][2 * i + 1]));
        h.user_header = user;
        h.user_header_size = n;
    }
    size_t length;
    uint8_t *bytes = am_header_serialize(&h, &length);
    print_hex("AM", bytes, length);
    free(bytes);
}

static void usage(void)
{
    fprintf(stderr, "usage: ucxx_peer server SCENARIO ARG... | client HOST PORT SCENARIO ARG... | "
                    "dump-tag-multi FRAME... | dump-am MEMTYPE POLICY OWNER|- ID USERHEADER_HEX|-\n"
                    "       SCENARIO: tagmulti FRAME... | am SIZE... | malformed\n");
    exit(1);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(TIMEOUT_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) usage();

    if (strcmp(argv[1], "dump-tag-multi") == 0) {
        parse_frames(argc, argv, 2);
        uint8_t (*headers)[HEADER_SIZE] = xmalloc(((frame_count + HEADER_FRAMES - 1) / HEADER_FRAMES + 1) * HEADER_SIZE);
        int n = build_headers(frame_sizes, NULL, frame_count, headers);
        for (int i = 0; i < n; i++) print_hex("HEADER", headers[i], HEADER_SIZE);
        printf("OK %d\n", n);
        return 0;
    }
    if (strcmp(argv[1], "dump-am") == 0) {
        if (argc != 7) usage();
        dump_am(argv + 2);
        printf("OK\n");
        return 0;
    }

    int server = strcmp(argv[1], "server") == 0;
    if (!server && strcmp(argv[1], "client") != 0) usage();
    int first = server ? 2 : 4;
    if (argc < first + 1) usage();
    const char *scenario = argv[first];
    if (strcmp(scenario, "tagmulti") == 0) {
        parse_frames(argc, argv, first + 1);
    } else if (strcmp(scenario, "am") == 0) {
        for (int i = first + 1; i < argc; i++) {
            if (am_count == MAX_AMS - 2) fail("too many AMs");
            char *end;
            unsigned long long size = strtoull(argv[i], &end, 10);
            if (*end != '\0' || argv[i][0] == '-' || size > 0xffffffffull) fail("bad size '%s'", argv[i]);
            am_sizes[am_count++] = (size_t)size;
        }
    } else if (strcmp(scenario, "malformed") != 0) {
        usage();
    }

    phase = "init";
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) fail("ucp_config_read: %s", ucs_status_string(status));
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
    status = ucp_init_version(1, 13, &params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) fail("ucp_init: %s", ucs_status_string(status));
    ucp_worker_params_t worker_params;
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &worker_params, &worker);
    if (status != UCS_OK) fail("ucp_worker_create: %s", ucs_status_string(status));
    set_am_handler(); /* as ucxx: at worker creation */

    if (server) serve();
    else connect_to(argv[2], argv[3]);

    if (strcmp(scenario, "tagmulti") == 0) run_tag_multi();
    else if (strcmp(scenario, "am") == 0) run_am();
    else run_malformed();

    phase = "close";
    ucp_request_param_t close_param;
    memset(&close_param, 0, sizeof(close_param));
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
    printf("OK\n");
    fflush(stdout);
    return 0;
}
