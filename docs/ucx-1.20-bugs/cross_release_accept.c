/*
 * UCX 1.20.1 reading a UCX 1.13.1 client's connection request: UCX promises no wire format across minor
 * versions, and 1.20.1 parses the 1.13.1 client's packed worker address as garbage. Mostly ucp_ep_create
 * refuses the request, each time with another status (UNREACHABLE after "no remote ep address for
 * lane[1]", INVALID_PARAM after "failed to parse address: number of ep addresses exceeds 64"), but now
 * and then the garbage parses, ucp_ep_create returns UCS_OK, and the endpoint fails at once
 * (CONNECTION_RESET: the client, refused on its side, already left). A listener cannot tell that
 * endpoint from a real client's that connected and closed at once.
 *
 *   sh cross_release_accept.sh SERVER_LIBDIR CLIENT_LIBDIR [TRIES]
 *   ./cross_release_accept server PORT N     # accepts N requests and says what ucp_ep_create made of each
 *   ./cross_release_accept client HOST PORT  # connects, flushes, reports, leaves
 *   NONE=1 in the environment: UCP_ERR_HANDLING_MODE_NONE on both sides instead of PEER
 *
 * Measured on 2026-12-06, a 1.20.1 server (libucx-cu12 wheel) and a 1.13.1 client (Debian 12):
 * PEER 1 of 10 requests created (9 refused), NONE 2 of 20 created (18 refused); every created
 * endpoint reported "Connection reset by remote peer" within 1 s. The client id
 * (UCP_WORKER_PARAM_FIELD_CLIENT_ID, sent with UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID) arrives intact
 * across the two releases in every request (ucp_conn_request_query: 0x7563787400000d01 as sent).
 * The other direction (a 1.13.1 server, 1.20.1 clients) refused every request (INVALID_PARAM).
 *
 * Workaround in ucxx-ts: a ucxx-ts worker's client id carries its UCX major and minor version
 * (src/internal/client-id.ts), and a ucxx-ts listener refuses (ucp_listener_reject) a ucxx-ts client
 * of another release range before ucp_ep_create reads its request: always a ConnectionAcceptError on
 * the listener's side and a ConnectionRefusedError on the client's. Clients that are not ucxx-ts on
 * another release keep UCX's behaviour above.
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_listener_h listener;
static ucp_conn_request_h pending;
static int ep_errors; static ucs_status_t last_err;
static int peer_mode = 1;

static void die(const char *what, ucs_status_t s) { fprintf(stderr, "%s: %s\n", what, ucs_status_string(s)); exit(1); }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; pending = req;
    ucp_conn_request_attr_t a = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID };
    ucs_status_t s = ucp_conn_request_query(req, &a);
    printf("client id %s 0x%llx\n", ucs_status_string(s), (unsigned long long)a.client_id); fflush(stdout); }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t s) { (void)arg; (void)ep; ++ep_errors; last_err = s; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void progress_for(double seconds) { double until = now() + seconds; while (now() < until) ucp_worker_progress(worker); }
static void nop_cb(void *req, ucs_status_t s, void *u) { (void)req; (void)s; (void)u; }

static void init(void) {
    ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM | UCP_FEATURE_RMA };
    ucs_status_t s = ucp_init(&p, NULL, &ctx); if (s != UCS_OK) die("init", s);
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_CLIENT_ID, .thread_mode = UCS_THREAD_MODE_SINGLE, .client_id = 0x7563787400000d01ULL };
    s = ucp_worker_create(ctx, &wp, &worker); if (s != UCS_OK) die("worker", s);
}

static void close_ep(ucp_ep_h ep) {
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
    void *r = ucp_ep_close_nbx(ep, &rp);
    if (UCS_PTR_IS_PTR(r)) { while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker); ucp_request_free(r); }
}

/* server PORT N: accepts N connection requests, one at a time, and says what ucp_ep_create made of each */
static int server(int port, int n) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof sa }, .conn_handler = { on_conn, NULL } };
    ucs_status_t s = ucp_listener_create(worker, &lp, &listener); if (s != UCS_OK) die("listen", s);
    printf("listening\n"); fflush(stdout);
    int refused = 0, created = 0, created_err = 0;
    for (int i = 0; i < n; i++) {
        while (pending == NULL) ucp_worker_progress(worker);
        ucp_conn_request_h req = pending; pending = NULL;
        ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                               .conn_request = req, .err_handler = { on_err, NULL },
                               .err_mode = peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE };
        ucp_ep_h h; ep_errors = 0;
        s = ucp_ep_create(worker, &ep, &h);
        if (s != UCS_OK) { ++refused; printf("request %d: ucp_ep_create: %s\n", i, ucs_status_string(s)); fflush(stdout); continue; }
        progress_for(1.0);
        ++created; if (ep_errors) ++created_err;
        printf("request %d: ucp_ep_create: OK, then %s\n", i, ep_errors ? ucs_status_string(last_err) : "no error in 1 s"); fflush(stdout);
        close_ep(h);
    }
    printf("server: %d refused by ucp_ep_create, %d created (%d of them reported an error)\n", refused, created, created_err);
    return 0;
}

/* client HOST PORT: connects, sends a flush, reports, leaves */
static int client(const char *host, int port) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) }; inet_pton(AF_INET, host, &sa.sin_addr);
    ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                           .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER | UCP_EP_PARAMS_FLAGS_SEND_CLIENT_ID, .sockaddr = { (struct sockaddr *)&sa, sizeof sa },
                           .err_handler = { on_err, NULL }, .err_mode = peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE };
    ucp_ep_h h; ucs_status_t s = ucp_ep_create(worker, &ep, &h); if (s != UCS_OK) die("connect", s);
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = nop_cb };
    void *r = ucp_ep_flush_nbx(h, &rp); s = UCS_OK;
    double until = now() + 3;
    if (UCS_PTR_IS_PTR(r)) { while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS && now() < until) ucp_worker_progress(worker); }
    else s = UCS_PTR_STATUS(r);
    printf("client: flush %s, ep errors %d (%s)\n", ucs_status_string(s), ep_errors, ep_errors ? ucs_status_string(last_err) : "-");
    progress_for(0.2);
    close_ep(h);
    return 0;
}

int main(int argc, char **argv) {
    if (getenv("NONE")) peer_mode = 0;
    init();
    if (argc >= 3 && !strcmp(argv[1], "server")) return server(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 10);
    if (argc >= 4 && !strcmp(argv[1], "client")) return client(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage\n"); return 2;
}
