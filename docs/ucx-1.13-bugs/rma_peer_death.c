/*
 * UCX 1.13.1: a peer that dies with RMA gets pending can crash the process that owns the memory.
 *
 *   gcc -O2 rma_peer_death.c -o rma_peer_death -lucp -lucs
 *   ./rma_peer_death owner [PORT]              # registers 64 MiB of malloc'ed memory, serves gets
 *   ./rma_peer_death initiator HOST PORT [N]   # N (default 64) 1 MiB gets, then SIGKILLs itself
 *
 * Both run with UCX's defaults; the initiator asks for peer error handling, as ucxx does. The owner
 * prints "owner: survived" and exits 0 when it lives through it. On UCX 1.13.1 it dies in about half of
 * the runs on one host (one in two to four with the endpoint closed from inside the error callback):
 *
 *   ucp_request.inl:346  Fatal: unexpected error: Endpoint timeout
 *     ucp_get_req_handler <- uct_tcp_iface_progress
 *
 * A get request the owner receives after the endpoint failed is answered on the failed lane, and an
 * error from the send is fatal (ucp_request_try_send). The same owner as a ucxx-ts process with memory
 * it registered (a Node buffer) also dies in the second way, in NONE error-handling mode too:
 *
 *   SIGSEGV in ucp_mem_rereg_mds <- ucp_request_memory_dereg <- ucp_request_send_state_ff
 *     <- uct_mm_ep_pending_purge <- ucp_worker_discard_uct_ep <- ucp_ep_set_failed
 *
 * (get replies still pending on the shared-memory lane are purged with a registration they never had).
 * Measured with ucxx-ts, 6 runs each, 64 x 1 MiB gets, one host:
 *
 *   owner's memory     initiator's mode   owner crashes
 *   UCX-allocated      none ('auto')      0 / 6   (one-sided through shared memory: the owner serves nothing)
 *   UCX-allocated      peer               5 / 6
 *   registered         none               5 / 6
 *   registered         peer               6 / 6
 *
 * Between hosts every get is served by the owner over TCP, so an owner there is exposed whatever its
 * memory. No setting of the owner's avoids it: the owner does not choose how a peer reads its memory.
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REGION (64u << 20)
#define CHUNK (1u << 20)
#define KEY_TAG 0x1234ull

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_conn_request_h pending_conn;
static int peer_failed;

static void die(const char *what, ucs_status_t s) { fprintf(stderr, "%s: %s\n", what, ucs_status_string(s)); exit(1); }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; pending_conn = req; }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t s) { (void)arg; (void)ep; printf("error callback: %s\n", ucs_status_string(s)); fflush(stdout); peer_failed = 1; }
static void noop_send(void *r, ucs_status_t s, void *u) { (void)r; (void)s; (void)u; }
static void noop_recv(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u) { (void)r; (void)s; (void)i; (void)u; }

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void wait_req(void *req) {
    if (req == NULL) return;
    if (UCS_PTR_IS_ERR(req)) die("request", UCS_PTR_STATUS(req));
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(req);
}

static void init(void) {
    ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                       .features = UCP_FEATURE_TAG | UCP_FEATURE_RMA };
    ucp_config_t *cfg;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg); if (s != UCS_OK) die("config", s);
    s = ucp_init(&p, cfg, &ctx); if (s != UCS_OK) die("init", s);
    ucp_config_release(cfg);
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    s = ucp_worker_create(ctx, &wp, &worker); if (s != UCS_OK) die("worker", s);
}

static int owner(int port) {
    void *mem = malloc(REGION); memset(mem, 7, REGION);
    ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                .address = mem, .length = REGION };
    ucp_mem_h memh; ucs_status_t s = ucp_mem_map(ctx, &mp, &memh); if (s != UCS_OK) die("mem_map", s);
    void *rkey; size_t rkey_len; s = ucp_rkey_pack(ctx, memh, &rkey, &rkey_len); if (s != UCS_OK) die("rkey_pack", s);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof sa }, .conn_handler = { on_conn, NULL } };
    ucp_listener_h listener; s = ucp_listener_create(worker, &lp, &listener); if (s != UCS_OK) die("listen", s);
    ucp_listener_attr_t la = { .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR }; ucp_listener_query(listener, &la);
    printf("PORT %d\n", ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port)); fflush(stdout);
    while (pending_conn == NULL) ucp_worker_progress(worker);
    ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER,
                             .conn_request = pending_conn, .err_handler = { on_err, NULL } };
    ucp_ep_h ep; s = ucp_ep_create(worker, &ep_p, &ep); if (s != UCS_OK) die("accept", s);

    size_t msg_len = 16 + rkey_len; char *msg = malloc(msg_len);
    uint64_t addr = (uint64_t)(uintptr_t)mem, len = rkey_len;
    memcpy(msg, &addr, 8); memcpy(msg + 8, &len, 8); memcpy(msg + 16, rkey, rkey_len);
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = noop_send };
    wait_req(ucp_tag_send_nbx(ep, msg, msg_len, KEY_TAG, &rp));
    printf("owner: key sent\n"); fflush(stdout);

    while (!peer_failed) ucp_worker_progress(worker);
    double until = now() + 5, next = now();
    while (now() < until) {
        ucp_worker_progress(worker);
        if (now() >= next) { printf("owner: alive\n"); fflush(stdout); next += 1; }
    }
    printf("owner: survived\n");
    return 0;
}

static int initiator(const char *host, int port, int n) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &sa.sin_addr);
    ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
                             .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER, .sockaddr = { (struct sockaddr *)&sa, sizeof sa },
                             .err_mode = UCP_ERR_HANDLING_MODE_PEER, .err_handler = { on_err, NULL } };
    ucp_ep_h ep; ucs_status_t s = ucp_ep_create(worker, &ep_p, &ep); if (s != UCS_OK) die("connect", s);
    char buf[4096];
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = noop_recv };
    wait_req(ucp_tag_recv_nbx(worker, buf, sizeof buf, KEY_TAG, ~0ull, &rp));
    uint64_t addr, len; memcpy(&addr, buf, 8); memcpy(&len, buf + 8, 8);
    ucp_rkey_h rkey; s = ucp_ep_rkey_unpack(ep, buf + 16, &rkey); if (s != UCS_OK) die("rkey_unpack", s);
    char *dst = malloc((size_t)n * CHUNK);
    ucp_request_param_t gp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = noop_send };
    for (int i = 0; i < n; i++) {
        void *r = ucp_get_nbx(ep, dst + (size_t)i * CHUNK, CHUNK, addr + (uint64_t)(i % 64) * CHUNK, rkey, &gp);
        if (UCS_PTR_IS_ERR(r)) die("get", UCS_PTR_STATUS(r));
    }
    for (int i = 0; i < 20; i++) ucp_worker_progress(worker);
    printf("initiator: %d gets posted, dying\n", n); fflush(stdout);
    kill(getpid(), SIGKILL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: see the top of the file\n"); return 2; }
    init();
    if (!strcmp(argv[1], "owner")) return owner(argc > 2 ? atoi(argv[2]) : 0);
    if (!strcmp(argv[1], "initiator") && argc >= 4) return initiator(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 64);
    return 2;
}
