/*
 * UCX 1.20.1 (libucx-cu12 wheel), with UCX's memory events off (UCX_MEM_EVENTS=n, or UCX_MEM_MMAP_HOOK_MODE=none,
 * as ucxx-ts sets both): closing a PEER-mode endpoint with a rendezvous send that the peer never matched
 * segfaults in the next ucp_worker_progress (forced, cancelled first, or graceful: 3/3 each):
 *
 *   ucp_worker_progress -> ... -> ucp_ep_reqs_purge -> ucp_proto_rndv_rts_abort
 *     -> ucp_request_memh_invalidate -> ucs_rcache_region_invalidate -> pthread_spin_lock(0x78): SIGSEGV
 *
 * UCX 1.13.1 survives the same program (it completes the send with UCS_ERR_CANCELED), and so does 1.20.1 with
 * its default memory hooks (it then has a registration cache). UCX_PROTO_ENABLE=n does not help.
 *
 *   gcc -O2 -Wall force_close_unmatched_rndv.c -o force_close_unmatched_rndv -lucp -lucs
 *   ./force_close_unmatched_rndv server PORT &
 *   ./force_close_unmatched_rndv client 127.0.0.1 PORT [SIZE [force|cancel|flush]]
 *   UCX_MEM_EVENTS=n sh force_close_unmatched_rndv.sh [LIBDIR]   # both sides, each way of closing, 5 tries each
 *
 * The server accepts one connection request (PEER error handling) and posts no receive. The client (PEER
 * mode) sends SIZE bytes (default 4 MiB: rendezvous) with ucp_tag_send_nbx from malloc'ed memory that UCX
 * registers itself, progresses 200 ms (the RTS goes out, nothing comes back), then:
 *   force   ucp_ep_close_nbx(UCP_EP_CLOSE_FLAG_FORCE) and progress until it completes   (1.20.1: SIGSEGV)
 *   cancel  ucp_request_cancel on the send first, progress until it completes, then the same forced close
 *   flush   ucp_ep_close_nbx without flags (a graceful close), progress up to 2 s, then force
 * and prints "client: survived (send status ...)".
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define CHECK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) { fprintf(stderr, "%s: %s\n", #x, ucs_status_string(s_)); exit(2); } } while (0)

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_conn_request_h conn_req;
static int send_done;
static ucs_status_t send_status = UCS_INPROGRESS;

static double now(void) { struct timeval tv; gettimeofday(&tv, NULL); return tv.tv_sec + tv.tv_usec / 1e6; }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; conn_req = req; }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t status) { (void)arg; (void)ep; fprintf(stderr, "error handler: %s\n", ucs_status_string(status)); }
static void on_send(void *req, ucs_status_t status, void *user) { (void)req; (void)user; send_status = status; send_done = 1; }

static void progress_for(double seconds) { double end = now() + seconds; while (now() < end) ucp_worker_progress(worker); }

static void wait_request(void *req, double seconds) {
    if (req == NULL || UCS_PTR_IS_ERR(req)) return;
    double end = now() + seconds;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && now() < end) ucp_worker_progress(worker);
    ucp_request_free(req);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: server PORT | client HOST PORT [SIZE [force|cancel|flush]]\n"); return 2; }
    int server = strcmp(argv[1], "server") == 0;
    /* The features of ucxx-ts's default context. */
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_AMO32 |
                    UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP };
    CHECK(ucp_init(&params, NULL, &ctx));
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    CHECK(ucp_worker_create(ctx, &wp, &worker));
    struct sockaddr_in sa = { .sin_family = AF_INET };
    ucp_ep_h ep;
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER, .err_handler = { .cb = on_err },
    };
    if (server) {
        sa.sin_port = htons(atoi(argv[2]));
        sa.sin_addr.s_addr = INADDR_ANY;
        ucp_listener_params_t lp = {
            .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
            .sockaddr = { .addr = (struct sockaddr *)&sa, .addrlen = sizeof(sa) }, .conn_handler = { .cb = on_conn },
        };
        ucp_listener_h listener;
        CHECK(ucp_listener_create(worker, &lp, &listener));
        printf("server: listening\n"); fflush(stdout);
        while (conn_req == NULL) ucp_worker_progress(worker);
        ep_params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
        ep_params.conn_request = conn_req;
        CHECK(ucp_ep_create(worker, &ep_params, &ep));
        printf("server: accepted, receiving nothing\n"); fflush(stdout);
        progress_for(30); /* the driver kills it */
        return 0;
    }
    size_t size = argc > 4 ? strtoul(argv[4], NULL, 0) : 4u << 20;
    const char *how = argc > 5 ? argv[5] : "force";
    sa.sin_port = htons(atoi(argv[3]));
    inet_pton(AF_INET, argv[2], &sa.sin_addr);
    ep_params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep_params.sockaddr.addr = (struct sockaddr *)&sa;
    ep_params.sockaddr.addrlen = sizeof(sa);
    CHECK(ucp_ep_create(worker, &ep_params, &ep));
    double wait_s = getenv("WAIT_MS") ? atof(getenv("WAIT_MS")) / 1000 : 0.2;
    if (getenv("NO_FLUSH") == NULL) {
        void *flush = ucp_ep_flush_nbx(ep, &(ucp_request_param_t){ .op_attr_mask = 0 });
        wait_request(flush, 5);
    }
    char *buf = malloc(size);
    memset(buf, 0x5e, size);
    ucp_request_param_t sp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = on_send };
    /* USER_MEMH=1: the workaround ucxx-ts applies on 1.20: the send buffer mapped with ucp_mem_map and
     * its handle passed to the send (UCP_OP_ATTR_FIELD_MEMH), so the purge skips the invalidation. */
    ucp_mem_h memh = NULL;
    if (getenv("USER_MEMH") != NULL && atoi(getenv("USER_MEMH")) != 0) {
        ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                    .address = buf, .length = size };
        CHECK(ucp_mem_map(ctx, &mp, &memh));
        sp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        sp.memh = memh;
    }
    /* First a synchronous 8-byte send, then the rendezvous one: nothing matches either. */
    static char small[8];
    ucp_request_param_t sync_param = { .op_attr_mask = 0 };
    void *sync = ucp_tag_send_sync_nbx(ep, small, sizeof(small), 0x5e5e, &sync_param);
    void *send = ucp_tag_send_nbx(ep, buf, size, 0x5e5e, &sp);
    printf("client: posted a %zu-byte send (%s)\n", size, send == NULL ? "done" : UCS_PTR_IS_ERR(send) ? "error" : "in flight");
    fflush(stdout);
    progress_for(wait_s);
    if (strcmp(how, "cancel") == 0 && send != NULL && !UCS_PTR_IS_ERR(send)) {
        ucp_request_cancel(worker, send);
        double end = now() + 2;
        while (!send_done && now() < end) ucp_worker_progress(worker);
        printf("client: cancelled: %s\n", send_done ? ucs_status_string(send_status) : "not completed in 2 s");
        fflush(stdout);
    }
    if (strcmp(how, "flush") == 0) {
        ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0 };
        void *close = ucp_ep_close_nbx(ep, &cp);
        printf("client: graceful close posted\n"); fflush(stdout);
        if (close != NULL && !UCS_PTR_IS_ERR(close)) {
            double end = now() + 2;
            while (ucp_request_check_status(close) == UCS_INPROGRESS && now() < end) ucp_worker_progress(worker);
            printf("client: graceful close: %s\n", ucs_status_string(ucp_request_check_status(close)));
            ucp_request_free(close);
        }
    } else {
        ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
        printf("client: forced close\n"); fflush(stdout);
        void *close = ucp_ep_close_nbx(ep, &cp);
        wait_request(close, 5);
    }
    progress_for(0.2);
    printf("client: survived (send %s)\n", send_done ? ucs_status_string(send_status) : "never completed");
    if (send != NULL && !UCS_PTR_IS_ERR(send)) ucp_request_free(send);
    if (sync != NULL && !UCS_PTR_IS_ERR(sync)) ucp_request_free(sync);
    if (memh != NULL) ucp_mem_unmap(ctx, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    free(buf);
    return 0;
}
