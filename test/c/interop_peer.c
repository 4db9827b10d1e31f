/*
 * interop_peer: a plain-UCP C program (libucp only, no ucxx-ts code) that exchanges tag, stream or
 * active messages with ucxx-ts, as the server or the client of a client-server connection. Driven by
 * test/interop.test.ts; it proves that what ucxx-ts sends and receives is ordinary UCP.
 *
 * Build:  gcc -O2 -Wall -Wextra interop_peer.c -o interop_peer -lucp -lucs
 * Usage:  interop_peer server API SIZE...              listen on 127.0.0.1, port 0; print "PORT <n>";
 *                                                      accept one connection
 *         interop_peer client HOST PORT API SIZE...    connect to HOST:PORT
 *         API is tag, stream or am; SIZE... the message sizes in bytes, message k has size SIZE[k].
 * Result: "OK ..." on stdout and exit 0, or one "FAIL <what>" line and exit 1. An alarm ends the
 *         program with "FAIL timed out ... in phase: <phase>" after TIMEOUT_S seconds, so it never
 *         hangs; the test sends SIGALRM itself when it gives up, to learn the phase.
 *
 * The pattern (identical in test/interop.test.ts): byte i of a message with seed s is
 *     (uint8_t)((i * 131 + s * 7 + (i >> 8)) ^ (i >> 16))
 *
 * The protocol, the same in both roles (endpoints use UCP_ERR_HANDLING_MODE_PEER):
 *  1. ucxx-ts sends message k (k = 0..N-1): SIZE[k] bytes of pattern seed 1 + 2k. This program
 *     receives each one and checks every byte (and the tag / header / length).
 *  2. This program sends message k back: SIZE[k] bytes of pattern seed 2 + 2k; ucxx-ts checks them.
 *  3. ucxx-ts sends an acknowledgement once it has checked everything; this program then closes the
 *     endpoint, prints OK and exits 0.
 *
 *  tag:    ts -> C  tag 0xfedcba9876543210 + k, received with ucp_tag_recv_nbx and a full mask into a
 *                   buffer SLACK bytes longer than the message (the sender tag, the length and the
 *                   untouched slack are checked).
 *          C -> ts  tag 0x8000000000000000 | SIZE[k] << 16 | k, with ucp_tag_send_nbx.
 *          ack      tag 0xacacacacacacacac, the 4 bytes "DONE".
 *  stream: ts -> C  the messages back to back on the stream; received with ucp_stream_recv_nbx and
 *                   UCP_STREAM_RECV_FLAG_WAITALL, one receive of exactly SIZE[k] bytes per message.
 *          C -> ts  the same with ucp_stream_send_nbx.
 *          ack      the 4 bytes "DONE" on the stream.
 *          Size 0 is refused for stream: UCP completes a 0-byte stream send at once and sends nothing,
 *          and a 0-byte stream receive means nothing (the test does not pass 0 for stream).
 *  am:     ts -> C  AM id 17, header of HEADER_LEN bytes: u32 k (little endian), u32 SIZE[k], then 8
 *                   bytes of pattern seed 100 + k; data SIZE[k] bytes (0 is allowed). The handler takes
 *                   eager messages whole (UCP_AM_FLAG_WHOLE_MSG) and fetches rendezvous ones
 *                   (UCP_AM_RECV_ATTR_FLAG_RNDV) with ucp_am_recv_data_nbx into a malloc'ed buffer,
 *                   returning UCS_INPROGRESS. Messages are indexed by the k in their header, so their
 *                   arrival order does not matter.
 *          C -> ts  AM id 18, header as above with pattern seed 200 + k, with ucp_am_send_nbx.
 *          ack      AM id 19, header "DONE", no data.
 *          The OK line reports how many messages arrived eager and rendezvous: "OK eager=E rndv=R".
 */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
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
#define STR(x) STR_(x)
#define STR_(x) #x
#define MAX_MESSAGES 64
#define SLACK 64
#define SLACK_BYTE 0xee

#define TAG_TS_TO_C 0xfedcba9876543210ull
#define TAG_C_TO_TS_BIT 0x8000000000000000ull
#define TAG_ACK 0xacacacacacacacacull

#define AM_TS_TO_C 17
#define AM_C_TO_TS 18
#define AM_ACK 19
#define HEADER_LEN 16

enum api { API_TAG, API_STREAM, API_AM };

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

static size_t sizes[MAX_MESSAGES];
static int count;

/* AM receive state, indexed by k. */
static int am_seen[MAX_MESSAGES];
static int am_verified;
static int am_eager, am_rndv;
static op_t am_ops[MAX_MESSAGES];
static uint8_t *am_buffers[MAX_MESSAGES];
static void *am_requests[MAX_MESSAGES];

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

static inline uint8_t pattern_byte(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131 + (size_t)seed * 7 + (i >> 8)) ^ (i >> 16));
}

static void fill(uint8_t *buffer, size_t length, unsigned seed)
{
    for (size_t i = 0; i < length; i++) buffer[i] = pattern_byte(i, seed);
}

/* Fails with the first differing byte. */
static void verify(const uint8_t *buffer, size_t length, unsigned seed, const char *what, int k)
{
    for (size_t i = 0; i < length; i++) {
        uint8_t expected = pattern_byte(i, seed);
        if (buffer[i] != expected) {
            fail("%s %d (%zu bytes): byte %zu is 0x%02x, expected 0x%02x", what, k, length, i, buffer[i],
                 expected);
        }
    }
}

static uint64_t tag_c_to_ts(int k)
{
    return TAG_C_TO_TS_BIT | ((uint64_t)sizes[k] << 16) | (uint64_t)k;
}

static void make_header(uint8_t *header, int k, unsigned seed)
{
    uint32_t kk = (uint32_t)k, size = (uint32_t)sizes[k];
    for (int b = 0; b < 4; b++) {
        header[b] = (uint8_t)(kk >> (8 * b));
        header[4 + b] = (uint8_t)(size >> (8 * b));
    }
    fill(header + 8, HEADER_LEN - 8, seed);
}

/* ---- request completion -------------------------------------------------------------------- */

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

/* Interprets an nbx return value: NULL (done, status OK), an error, or a request completed by a callback. */
static void *track(ucs_status_ptr_t request, op_t *op, const char *what, int k)
{
    if (request == NULL) {
        op->status = UCS_OK;
        op->done = 1;
        return NULL;
    }
    if (UCS_PTR_IS_ERR(request)) fail("%s %d: %s", what, k, ucs_status_string(UCS_PTR_STATUS(request)));
    return request;
}

static void wait_op(void *request, op_t *op, const char *what, int k)
{
    while (!op->done) ucp_worker_progress(worker);
    if (request != NULL) ucp_request_free(request);
    if (op->status != UCS_OK) fail("%s %d completed with %s", what, k, ucs_status_string(op->status));
}

/* ---- connection ------------------------------------------------------------------------------ */

static void on_ep_error(void *arg, ucp_ep_h failed, ucs_status_t status)
{
    (void)arg;
    (void)failed;
    /* After the acknowledgement the peer may close first: that is the end of the exchange. */
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
    params.conn_handler.arg = NULL;
    ucs_status_t status = ucp_listener_create(worker, &params, &listener);
    if (status != UCS_OK) fail("ucp_listener_create: %s", ucs_status_string(status));

    ucp_listener_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    status = ucp_listener_query(listener, &attr);
    if (status != UCS_OK) fail("ucp_listener_query: %s", ucs_status_string(status));
    int port = ntohs(((struct sockaddr_in *)&attr.sockaddr)->sin_port);
    printf("PORT %d\n", port);
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

/* ---- tag ----------------------------------------------------------------------------------- */

static void run_tag(void)
{
    static const char ack_text[4] = {'D', 'O', 'N', 'E'};
    phase = "tag: receive from ucxx-ts";
    for (int k = 0; k < count; k++) {
        size_t size = sizes[k];
        uint8_t *buffer = malloc(size + SLACK);
        if (buffer == NULL) fail("out of memory");
        memset(buffer, SLACK_BYTE, size + SLACK);
        op_t op;
        memset(&op, 0, sizeof(op));
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        /* NO_IMM_CMPL: the callback, not recv_info, reports the sender tag and length. */
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                             UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        param.cb.recv = tag_recv_cb;
        param.user_data = &op;
        param.recv_info.tag_info = &op.info;
        uint64_t tag = TAG_TS_TO_C + (uint64_t)k;
        void *request = track(ucp_tag_recv_nbx(worker, buffer, size + SLACK, tag, UINT64_MAX, &param), &op,
                              "ucp_tag_recv_nbx", k);
        wait_op(request, &op, "tag receive", k);
        if (op.info.sender_tag != tag) {
            fail("tag message %d: sender tag 0x%016llx, expected 0x%016llx", k,
                 (unsigned long long)op.info.sender_tag, (unsigned long long)tag);
        }
        if (op.info.length != size) fail("tag message %d: length %zu, expected %zu", k, op.info.length, size);
        verify(buffer, size, 1 + 2 * k, "tag message", k);
        for (size_t i = size; i < size + SLACK; i++) {
            if (buffer[i] != SLACK_BYTE) fail("tag message %d: byte %zu past the end was written", k, i);
        }
        free(buffer);
    }

    phase = "tag: send to ucxx-ts";
    uint8_t *buffers[MAX_MESSAGES];
    void *requests[MAX_MESSAGES];
    op_t ops[MAX_MESSAGES];
    memset(ops, 0, sizeof(ops));
    for (int k = 0; k < count; k++) {
        buffers[k] = malloc(sizes[k] + 1);
        if (buffers[k] == NULL) fail("out of memory");
        fill(buffers[k], sizes[k], 2 + 2 * k);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send = send_cb;
        param.user_data = &ops[k];
        requests[k] = track(ucp_tag_send_nbx(ep, buffers[k], sizes[k], tag_c_to_ts(k), &param), &ops[k],
                            "ucp_tag_send_nbx", k);
    }
    for (int k = 0; k < count; k++) {
        wait_op(requests[k], &ops[k], "tag send", k);
        free(buffers[k]);
    }

    phase = "tag: wait for the acknowledgement";
    uint8_t ack[16];
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = tag_recv_cb;
    param.user_data = &op;
    param.recv_info.tag_info = &op.info;
    void *request = track(ucp_tag_recv_nbx(worker, ack, sizeof(ack), TAG_ACK, UINT64_MAX, &param), &op,
                          "ucp_tag_recv_nbx (ack)", 0);
    wait_op(request, &op, "ack receive", 0);
    if (op.info.length != 4 || memcmp(ack, ack_text, 4) != 0) fail("bad acknowledgement (%zu bytes)", op.info.length);
    acked = 1;
}

/* ---- stream -------------------------------------------------------------------------------- */

static void stream_recv_exact(uint8_t *buffer, size_t size, const char *what, int k)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.recv_stream = length_cb;
    param.user_data = &op;
    param.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    size_t length = 0;
    void *request = track(ucp_stream_recv_nbx(ep, buffer, size, &length, &param), &op, "ucp_stream_recv_nbx", k);
    if (request == NULL) op.length = length;
    wait_op(request, &op, what, k);
    if (op.length != size) fail("%s %d: WAITALL receive got %zu bytes, expected %zu", what, k, op.length, size);
}

static void run_stream(void)
{
    phase = "stream: receive from ucxx-ts";
    for (int k = 0; k < count; k++) {
        uint8_t *buffer = malloc(sizes[k]);
        if (buffer == NULL) fail("out of memory");
        memset(buffer, SLACK_BYTE, sizes[k]);
        stream_recv_exact(buffer, sizes[k], "stream message", k);
        verify(buffer, sizes[k], 1 + 2 * k, "stream message", k);
        free(buffer);
    }

    phase = "stream: send to ucxx-ts";
    uint8_t *buffers[MAX_MESSAGES];
    void *requests[MAX_MESSAGES];
    op_t ops[MAX_MESSAGES];
    memset(ops, 0, sizeof(ops));
    for (int k = 0; k < count; k++) {
        buffers[k] = malloc(sizes[k]);
        if (buffers[k] == NULL) fail("out of memory");
        fill(buffers[k], sizes[k], 2 + 2 * k);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send = send_cb;
        param.user_data = &ops[k];
        requests[k] = track(ucp_stream_send_nbx(ep, buffers[k], sizes[k], &param), &ops[k], "ucp_stream_send_nbx", k);
    }
    for (int k = 0; k < count; k++) {
        wait_op(requests[k], &ops[k], "stream send", k);
        free(buffers[k]);
    }

    phase = "stream: wait for the acknowledgement";
    uint8_t ack[4];
    stream_recv_exact(ack, sizeof(ack), "stream acknowledgement", 0);
    if (memcmp(ack, "DONE", 4) != 0) fail("bad stream acknowledgement");
    acked = 1;
}

/* ---- active messages ----------------------------------------------------------------------- */

static void am_data_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    length_cb(request, status, length, user_data);
}

static void check_am_done(int k)
{
    op_t *op = &am_ops[k];
    if (am_requests[k] != NULL) {
        ucp_request_free(am_requests[k]);
        am_requests[k] = NULL;
    }
    if (op->status != UCS_OK) fail("AM %d: rendezvous receive completed with %s", k, ucs_status_string(op->status));
    if (op->length != sizes[k]) fail("AM %d: rendezvous receive got %zu bytes, expected %zu", k, op->length, sizes[k]);
    verify(am_buffers[k], sizes[k], 1 + 2 * k, "AM (rendezvous)", k);
    free(am_buffers[k]);
    am_buffers[k] = NULL;
    am_verified++;
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    (void)arg;
    if (header_length != HEADER_LEN || header == NULL) fail("AM: header of %zu bytes, expected %d", header_length, HEADER_LEN);
    const uint8_t *h = header;
    uint32_t k = 0, size = 0;
    for (int b = 0; b < 4; b++) {
        k |= (uint32_t)h[b] << (8 * b);
        size |= (uint32_t)h[4 + b] << (8 * b);
    }
    if (k >= (uint32_t)count) fail("AM: header names message %u of %d", k, count);
    if (am_seen[k]) fail("AM %u arrived twice", k);
    am_seen[k] = 1;
    if (size != sizes[k]) fail("AM %u: header says %u bytes, expected %zu", k, size, sizes[k]);
    verify(h + 8, HEADER_LEN - 8, 100 + k, "AM header", (int)k);
    if (length != sizes[k]) fail("AM %u: length %zu, expected %zu", k, length, sizes[k]);

    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        am_rndv++;
        am_buffers[k] = malloc(length + 1);
        if (am_buffers[k] == NULL) fail("out of memory");
        memset(am_buffers[k], SLACK_BYTE, length + 1);
        ucp_request_param_t rp;
        memset(&rp, 0, sizeof(rp));
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO |
                          UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        rp.cb.recv_am = am_data_cb;
        rp.user_data = &am_ops[k];
        rp.recv_info.length = &am_ops[k].length;
        ucs_status_ptr_t request = ucp_am_recv_data_nbx(worker, data, am_buffers[k], length, &rp);
        if (request == NULL) {
            am_ops[k].status = UCS_OK;
            am_ops[k].done = 1;
            check_am_done((int)k);
        } else if (UCS_PTR_IS_ERR(request)) {
            fail("ucp_am_recv_data_nbx %u: %s", k, ucs_status_string(UCS_PTR_STATUS(request)));
        } else {
            /* Freed once complete: ucp_request_free before completion would suppress the callback. */
            am_requests[k] = request;
        }
        /* ucp_am_recv_data_nbx took the descriptor over. */
        return UCS_INPROGRESS;
    }
    am_eager++;
    if (length > 0 && data == NULL) fail("AM %u: eager message with no data pointer", k);
    verify(data, length, 1 + 2 * k, "AM (eager)", (int)k);
    am_verified++;
    return UCS_OK;
}

static ucs_status_t on_am_ack(void *arg, const void *header, size_t header_length, void *data, size_t length,
                              const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)data;
    (void)param;
    if (header_length != 4 || memcmp(header, "DONE", 4) != 0 || length != 0) {
        fail("bad AM acknowledgement: header %zu bytes, data %zu bytes", header_length, length);
    }
    acked = 1;
    return UCS_OK;
}

static void set_am_handler(unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t param;
    memset(&param, 0, sizeof(param));
    param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    param.id = id;
    param.flags = UCP_AM_FLAG_WHOLE_MSG;
    param.cb = cb;
    param.arg = NULL;
    ucs_status_t status = ucp_worker_set_am_recv_handler(worker, &param);
    if (status != UCS_OK) fail("ucp_worker_set_am_recv_handler(%u): %s", id, ucs_status_string(status));
}

static void run_am(void)
{
    phase = "am: receive from ucxx-ts";
    for (;;) {
        int pending = 0;
        for (int k = 0; k < count; k++) {
            if (!am_seen[k]) pending = 1;
            else if (am_buffers[k] != NULL && am_ops[k].done) check_am_done(k);
            else if (am_buffers[k] != NULL) pending = 1;
        }
        if (!pending && am_verified == count) break;
        ucp_worker_progress(worker);
    }

    phase = "am: send to ucxx-ts";
    uint8_t *buffers[MAX_MESSAGES];
    uint8_t headers[MAX_MESSAGES][HEADER_LEN];
    void *requests[MAX_MESSAGES];
    op_t ops[MAX_MESSAGES];
    memset(ops, 0, sizeof(ops));
    for (int k = 0; k < count; k++) {
        buffers[k] = malloc(sizes[k] + 1);
        if (buffers[k] == NULL) fail("out of memory");
        fill(buffers[k], sizes[k], 2 + 2 * k);
        make_header(headers[k], k, 200 + k);
        ucp_request_param_t param;
        memset(&param, 0, sizeof(param));
        param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        param.cb.send = send_cb;
        param.user_data = &ops[k];
        requests[k] = track(ucp_am_send_nbx(ep, AM_C_TO_TS, headers[k], HEADER_LEN, buffers[k], sizes[k], &param),
                            &ops[k], "ucp_am_send_nbx", k);
    }
    for (int k = 0; k < count; k++) {
        wait_op(requests[k], &ops[k], "AM send", k);
        free(buffers[k]);
    }

    phase = "am: wait for the acknowledgement";
    while (!acked) ucp_worker_progress(worker);
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
    fprintf(stderr, "usage: interop_peer server API SIZE... | interop_peer client HOST PORT API SIZE...\n"
                    "       API: tag | stream | am\n");
    printf("FAIL bad command line\n");
    exit(1);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(TIMEOUT_S);
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (argc < 2) usage();
    int server = strcmp(argv[1], "server") == 0;
    if (!server && strcmp(argv[1], "client") != 0) usage();
    int first = server ? 2 : 4;
    if (argc < first + 2) usage();
    const char *api_name = argv[first];
    enum api api;
    if (strcmp(api_name, "tag") == 0) api = API_TAG;
    else if (strcmp(api_name, "stream") == 0) api = API_STREAM;
    else if (strcmp(api_name, "am") == 0) api = API_AM;
    else usage();
    for (int i = first + 1; i < argc; i++) {
        if (count == MAX_MESSAGES) fail("more than %d sizes", MAX_MESSAGES);
        char *end;
        unsigned long long size = strtoull(argv[i], &end, 10);
        if (*end != '\0' || argv[i][0] == '-' || size > 0xffffffffull) fail("bad size '%s'", argv[i]);
        if (size == 0 && api == API_STREAM) fail("size 0 is not a stream message (UCP sends nothing for it)");
        sizes[count++] = (size_t)size;
    }

    phase = "init";
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) fail("ucp_config_read: %s", ucs_status_string(status));
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM;
    status = ucp_init_version(1, 13, &params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) fail("ucp_init: %s", ucs_status_string(status));

    ucp_worker_params_t worker_params;
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &worker_params, &worker);
    if (status != UCS_OK) fail("ucp_worker_create: %s", ucs_status_string(status));

    /* Handlers first: ucxx-ts may send as soon as the connection exists. */
    if (api == API_AM) {
        set_am_handler(AM_TS_TO_C, on_am);
        set_am_handler(AM_ACK, on_am_ack);
    }

    if (server) serve();
    else connect_to(argv[2], argv[3]);

    switch (api) {
    case API_TAG: run_tag(); break;
    case API_STREAM: run_stream(); break;
    case API_AM: run_am(); break;
    }

    /* Graceful close (flushes); bounded, since the peer may already be closing its side. */
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

    if (api == API_AM) printf("OK eager=%d rndv=%d\n", am_eager, am_rndv);
    else printf("OK\n");
    fflush(stdout);
    return 0;
}
