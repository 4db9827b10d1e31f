/*
 * UCX 1.13.1: a client whose connect the server never answers aborts when it destroys its worker.
 *
 *   gcc -O2 -Wall connect_never_answered.c -o connect_never_answered -lucp -lucs
 *   ./connect_never_answered server [PORT]                 # PORT 13337; listens, then never progresses
 *   ./connect_never_answered client HOST PORT [plain|shutdown|peer]
 *   sh connect_never_answered.sh [TRIES]                     # all three client variants, TRIES each
 *
 * Exit status: 0 clean, 134 the abort, 3 the connect failed by itself (nobody listening: not this case).
 *
 * The server creates a ucp_listener (UCX's defaults) and then stops progressing its worker, as a
 * process whose event loop is blocked, or stopped (the driver SIGSTOPs it as well): the kernel accepts
 * the TCP connection, but no UCX wireup answer ever comes. The client connects as ucxx-ts does on one
 * host: ucp_ep_create with the socket address (UCP_EP_PARAMS_FLAGS_CLIENT_SERVER), error handling
 * mode NONE (UCX's default; PEER leaves shared memory out), then ucp_ep_flush_nbx to learn when the
 * connection is up. It gives up after 1 s of progress (its own timer, no UCX setting), closes the
 * endpoint gracefully (UCX refuses UCP_EP_CLOSE_FLAG_FORCE on a NONE-mode endpoint: INVALID_PARAM),
 * progresses 1 s more, and destroys its worker:
 *
 *   plain:    ucp_ep.c:1185  Bug: pending request 0x... (ucp_ep_flush_progress_pending) on ep 0x...
 *             should have been flushed
 *              4  libucp.so.0(ucp_wireup_ep_pending_queue_purge+0x97)
 *              6  libucp.so.0(ucp_ep_cleanup_lanes+0xaa)
 *              7  libucp.so.0(ucp_ep_destroy_internal+0x19)
 *              9  libucp.so.0(ucp_worker_destroy+0x16d)
 *
 * SIGABRT, exit status 134. The connect's flush (and the close's own flush) wait in the pending queue
 * of the endpoint's connection-manager lane; ucp_worker_destroy purges every other lane with an error
 * first, but the CM lane only in ucp_ep_cleanup_lanes, whose purge callback
 * (ucp_destroyed_ep_pending_purge) is ucs_bug for any request it finds. Nothing in the public API
 * takes them off: ucp_request_cancel does not cancel a flush, FORCE is refused in NONE mode, and in
 * NONE mode UCX has no timer (keepalive) that would fail the endpoint.
 *
 *   shutdown: before closing, the client finds its connection's socket (ucp_ep_query's local and
 *             remote socket addresses, matched against getsockname/getpeername of its descriptors)
 *             and shuts it down (shutdown(2), SHUT_RDWR; not close: the descriptor stays UCX's). UCX
 *             takes it for the server gone ("error during flush: Endpoint timeout"), fails the
 *             endpoint and the queued flushes (status -80 / -25), and the destroy is clean: exit 0.
 *             This is what ucxx-ts does (src/endpoint/connect-abort.ts).
 *   peer:     the same connect in PEER mode, closed with UCP_EP_CLOSE_FLAG_FORCE: UCX discards every
 *             lane with an error, the destroy is clean: exit 0.
 *
 * Measured 2026-12-03 (Debian 12, libucx0 1.13.1, 2 vCPUs): plain 10 of 10 aborted, shutdown 0 of 10,
 * peer 0 of 9 (sh connect_never_answered.sh 10; one peer run found its port taken). Through ucxx-ts
 * before it shut the socket down: context.close() and process.exit() after a connect given up by a
 * timer aborted 6 of 6 each.
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static ucp_context_h context;
static ucp_worker_h worker;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        fprintf(stderr, "%s: %s\n", what, ucs_status_string(status));
        exit(2);
    }
}

static void setup(void)
{
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                            .features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_STREAM };
    ucp_worker_params_t wparams = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                    .thread_mode = UCS_THREAD_MODE_SINGLE };
    check(ucp_init(&params, NULL, &context), "ucp_init");
    check(ucp_worker_create(context, &wparams, &worker), "ucp_worker_create");
}

/* Progresses for `seconds` or until `request` (if any) is no longer in progress; returns its status. */
static ucs_status_t progress_for(void *request, double seconds)
{
    double end = now() + seconds;
    ucs_status_t status = UCS_INPROGRESS;
    while (now() < end) {
        ucp_worker_progress(worker);
        if (request != NULL && (status = ucp_request_check_status(request)) != UCS_INPROGRESS) break;
    }
    return status;
}

static void on_conn_request(ucp_conn_request_h request, void *arg)
{
    (void)request; (void)arg; /* never called: the server never progresses */
}

static int server(int port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ucp_listener_params_t lparams = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = { .addr = (struct sockaddr *)&addr, .addrlen = sizeof(addr) },
        .conn_handler = { .cb = on_conn_request, .arg = NULL },
    };
    ucp_listener_h listener;
    setup();
    check(ucp_listener_create(worker, &lparams, &listener), "ucp_listener_create");
    printf("listening on %d\n", port);
    fflush(stdout);
    for (;;) pause(); /* a blocked event loop: the worker is never progressed again */
    return 0;
}

/* The descriptor of this process's TCP connection between the endpoint's two socket addresses. */
static int connection_fd(ucp_ep_h ep)
{
    ucp_ep_attr_t attr = { .field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR };
    check(ucp_ep_query(ep, &attr), "ucp_ep_query");
    for (int fd = 0; fd < 1024; fd++) {
        struct sockaddr_storage local, remote;
        socklen_t llen = sizeof(local), rlen = sizeof(remote);
        if (getsockname(fd, (struct sockaddr *)&local, &llen) != 0 || local.ss_family != AF_INET) continue;
        if (getpeername(fd, (struct sockaddr *)&remote, &rlen) != 0) continue;
        if (memcmp(&local, &attr.local_sockaddr, sizeof(struct sockaddr_in)) == 0 &&
            memcmp(&remote, &attr.remote_sockaddr, sizeof(struct sockaddr_in)) == 0) {
            return fd;
        }
    }
    return -1;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)arg; (void)ep;
    printf("error callback: %s\n", ucs_status_string(status));
}

static void on_flush(void *request, ucs_status_t status, void *arg)
{
    (void)request; (void)arg;
    printf("connect flush completed: %s\n", ucs_status_string(status));
}

static int client(const char *host, int port, const char *variant)
{
    int peer = strcmp(variant, "peer") == 0;
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &addr.sin_addr);
    ucp_ep_params_t eparams = {
        .field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = { .addr = (struct sockaddr *)&addr, .addrlen = sizeof(addr) },
        .err_mode = peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE,
        .err_handler = { .cb = on_error, .arg = NULL },
    };
    ucp_request_param_t fparam = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = on_flush };
    ucp_request_param_t cparam = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = peer ? UCP_EP_CLOSE_FLAG_FORCE : 0 };
    ucp_ep_h ep;
    void *flush, *close;
    setup();
    check(ucp_ep_create(worker, &eparams, &ep), "ucp_ep_create");
    flush = ucp_ep_flush_nbx(ep, &fparam);
    if (!UCS_PTR_IS_PTR(flush)) {
        printf("the connect flush did not wait (%s): is the server progressing?\n", ucs_status_string(UCS_PTR_STATUS(flush)));
        return 3;
    }
    if (progress_for(flush, 1.0) != UCS_INPROGRESS) {
        printf("the connect ended by itself: %s (nobody listening?)\n", ucs_status_string(ucp_request_check_status(flush)));
        return 3;
    }
    printf("connect flush after 1 s: in progress (giving up)\n");
    if (strcmp(variant, "shutdown") == 0) {
        int fd = connection_fd(ep);
        printf("connection socket: fd %d\n", fd);
        if (fd >= 0) shutdown(fd, SHUT_RDWR);
        progress_for(flush, 1.0);
    }
    close = ucp_ep_close_nbx(ep, &cparam);
    printf("close: %s\n", UCS_PTR_IS_PTR(close) ? "in progress" : ucs_status_string(UCS_PTR_STATUS(close)));
    if (UCS_PTR_IS_PTR(close)) {
        printf("close after 1 s: %s\n", ucs_status_string(progress_for(close, 1.0)));
    }
    if (UCS_PTR_IS_PTR(close)) ucp_request_free(close);
    ucp_request_free(flush);
    fflush(stdout);
    ucp_worker_destroy(worker); /* plain: aborts here */
    ucp_cleanup(context);
    printf("clean exit\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "server") == 0) return server(argc > 2 ? atoi(argv[2]) : 13337);
    if (argc >= 4 && strcmp(argv[1], "client") == 0) return client(argv[2], atoi(argv[3]), argc > 4 ? argv[4] : "plain");
    fprintf(stderr, "usage: %s server [PORT] | client HOST PORT [plain|shutdown|peer]\n", argv[0]);
    return 1;
}
