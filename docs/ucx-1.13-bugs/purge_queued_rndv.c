/*
 * UCX 1.13.1: tearing down an initiator whose peer is stopped, with rendezvous sends or gets queued.
 * Written to reproduce "the initiator aborts purging its own requests" (ucp_ep_reqs_purge ->
 * ucp_request_memory_dereg -> ucp_mem_rereg_mds "failed to dereg from md[3]=posix: Unsupported
 * operation", then the cma_md.c:169 assertion; seen 3 times in 14 runs of a larger ucxx-ts test). THAT
 * CRASH DID NOT REPRODUCE HERE: not once in 148 runs, 68 of them with a force close (below). Two other aborts on
 * the same teardown paths did reproduce, reliably.
 *
 *   gcc -O2 -Wall purge_queued_rndv.c -o purge_queued_rndv -lucp -lucs
 *   ./purge_queued_rndv server [PORT]
 *   ./purge_queued_rndv client HOST PORT [tag|get [malloc|map [N [SIZE [CLOSE [GIVEUP_MS]]]]]]
 *   sudo sh purge_queued_rndv.sh tag malloc 128 2097152 destroy 10     # the experiment, two "hosts"
 *
 * The server accepts one client from a ucp_listener connection request (PEER error handling), registers
 * 64 MiB of malloc'ed memory, sends the address and packed rkey in a tag message and keeps 16 tag
 * receives of 4 MiB posted. The client (PEER mode) posts N operations of SIZE bytes at once: 'tag' =
 * ucp_tag_send_nbx (rendezvous at these sizes), 'get' = ucp_get_nbx from the server's memory; from/into
 * malloc'ed memory that is not registered ('malloc', so UCX registers it) or that is ucp_mem_map'ed and
 * passed as UCP_OP_ATTR_FIELD_MEMH ('map'). The driver puts them in two network namespaces (each in its
 * own UTS+IPC namespace: two hosts to UCX, TCP only) and SIGSTOPs the server 0.2 s after the client
 * posted (STOP_DELAY_S). The client progresses until nothing has completed for GIVEUP_MS (1000), then:
 *   force      ucp_ep_close_nbx(UCP_EP_CLOSE_FLAG_FORCE), then at once ucp_worker_destroy
 *   forcewait  the same, with 1 s of ucp_worker_progress between the close and the destroy
 *   flush      ucp_ep_close_nbx without flags, progress up to 5 s (it never completes: the peer is
 *              stopped), then ucp_worker_destroy with the close still in progress
 *   destroy    ucp_worker_destroy with the endpoint open
 * and prints "client: survived". UCX's defaults on both sides (no UCX_* variable set).
 *
 * Measured 2026-12-01 (2 vCPUs shared with another CPU-heavy job, nice -n 10), client crashes / runs:
 *
 *   op   SIZE   N    memory  force   flush   destroy   forcewait
 *   tag  2 MiB  128  malloc  0/10    10/10   10/10
 *   tag  2 MiB  128  map     0/10    10/10   10/10
 *   tag  4 MiB  256  malloc  10/10                     0/5
 *   get  1 MiB  256  malloc  0/10 (and 0/10 with STOP_DELAY_S 0)   10/10   9/10
 *   get  1 MiB  256  map     0/10    4/10    3/10
 *
 * 1. flush / destroy: every run that still had operations in flight (53 of 53; 32-252 of them) aborts;
 *    the runs that did not (the 'get map' ones where all 256 gets had completed before the stop, and one
 *    'get malloc destroy') survive:
 *
 *      ucp_ep.c:437  Assertion `ucs_hlist_is_empty(&ucp_ep_ext_gen(ep)->proto_reqs)' failed
 *        ucp_ep_destroy_base <- (static) <- ucp_worker_destroy <- main
 *
 *    ucp_worker_destroy destroys the endpoint without purging its tracked requests (rendezvous sends,
 *    sw gets). A not-yet-completed graceful close does not help. (docs/UCX-NOTES mentions the same
 *    assertion for a double ucp_ep_close_nbx with a rendezvous send pending.)
 * 2. force: ucp_ep_close_nbx(FORCE) returns NULL (done) at once, yet most operations have not completed
 *    ("22 done, 10 failed" of 256; with gets "203 done, 0 failed"): the rest are cancelled only by a
 *    later ucp_worker_progress (forcewait: "22 done, 234 failed"). Destroying the worker right after the
 *    close survives with 128 x 2 MiB sends and 256 x 1 MiB gets, but with 256 x 4 MiB sends it crashed
 *    10 times in 10:
 *
 *      Caught signal 11 (Segmentation fault: address not mapped to object at address 0x7ff14b608014)
 *        ucs_callbackq_remove_if <- ucp_worker_destroy <- main
 *
 *    With 1 s of progress between close and destroy: 0 of 5.
 *
 * Not seen in any run: "failed to dereg from md[...]", a cma_md.c or tcp_md.c assertion, or a crash
 * inside ucp_ep_reqs_purge. Also tried on 2026-12-02, 'tag malloc 128 x 2 MiB forcewait', 8 runs each,
 * 0 crashes in all 24: the client with ucxx-ts's environment (UCX_MEM_MMAP_HOOK_MODE=none
 * UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no); the same with UCX_KEEPALIVE_INTERVAL=500ms and a 6 s
 * give-up; and with every feature ucxx-ts enables (TAG RMA AMO32 AMO64 STREAM AM WAKEUP). The abort as
 * the ucxx-ts client met it in CI that day (faults.test.ts, two hosts, its failureTimeout had
 * force-closed the endpoint of a stopped peer with rendezvous tag sends of Node buffers queued):
 *
 *   ucp_mm.c:84  UCX  WARN  failed to dereg from md[3]=posix: Unsupported operation
 *   cma_md.c:169  Assertion `params->memh == (void*)0xdeadbeef' failed
 *     uct_md_mem_dereg <- ucp_mem_rereg_mds <- ucp_request_memory_dereg <- ucp_ep_req_purge
 *     <- ucp_ep_reqs_purge <- (static) <- (static) <- (callbackq) <- ucp_worker_progress Not tried for lack of time: a link cut instead of SIGSTOP, sizes other than
 * the above, rendezvous sends mixed with gets on one endpoint, a peer killed (SIGKILL) instead of
 * stopped, and closing from inside the error callback.
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
#define MAX_POOL (256u << 20)
#define KEY_TAG 0x1234ull
#define DATA_TAG 0x77ull
#define SERVER_RECVS 16

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_conn_request_h pending_conn;
static int peer_failed;
static long ops_done, ops_failed, recvs_done;

static void die(const char *what, ucs_status_t s) { fprintf(stderr, "%s: %s\n", what, ucs_status_string(s)); exit(1); }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; pending_conn = req; }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t s) {
    (void)ep; printf("%s: error callback: %s\n", (const char *)arg, ucs_status_string(s)); fflush(stdout); peer_failed = 1;
}
static void noop_send(void *r, ucs_status_t s, void *u) { (void)r; (void)s; (void)u; }
static void noop_recv(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u) { (void)r; (void)s; (void)i; (void)u; }
static void op_done(void *r, ucs_status_t s, void *u) { (void)r; (void)u; if (s == UCS_OK) ++ops_done; else ++ops_failed; }
static void data_recv(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u) {
    (void)s; (void)i; (void)u; ++recvs_done; ucp_request_free(r);
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void wait_req(void *req) {
    if (req == NULL) return;
    if (UCS_PTR_IS_ERR(req)) die("request", UCS_PTR_STATUS(req));
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(req);
}

static void init(void) {
    ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_RMA };
    ucp_config_t *cfg;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg); if (s != UCS_OK) die("config", s);
    s = ucp_init(&p, cfg, &ctx); if (s != UCS_OK) die("init", s);
    ucp_config_release(cfg);
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    s = ucp_worker_create(ctx, &wp, &worker); if (s != UCS_OK) die("worker", s);
}

static void *map(void *mem, size_t len, ucp_mem_h *memh) {
    ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                .address = mem, .length = len };
    ucs_status_t s = ucp_mem_map(ctx, &mp, memh); if (s != UCS_OK) die("mem_map", s);
    return mem;
}

/* The peer: accepts one client, registers REGION bytes of malloc'ed memory (so that the client can get
 * from it), sends the address and packed rkey, then keeps SERVER_RECVS tag receives of up to 4 MiB
 * posted. It is the process that gets SIGSTOPped; it never exits by itself. */
static int server(int port) {
    ucp_mem_h memh; void *mem = map(malloc(REGION), REGION, &memh); memset(mem, 7, REGION);
    void *rkey; size_t rkey_len; ucs_status_t s = ucp_rkey_pack(ctx, memh, &rkey, &rkey_len); if (s != UCS_OK) die("rkey_pack", s);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof sa }, .conn_handler = { on_conn, NULL } };
    ucp_listener_h listener; s = ucp_listener_create(worker, &lp, &listener); if (s != UCS_OK) die("listen", s);
    printf("server: listening on %d\n", port); fflush(stdout);
    while (pending_conn == NULL) ucp_worker_progress(worker);
    ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                           UCP_EP_PARAM_FIELD_ERR_HANDLER,
                             .conn_request = pending_conn, .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                             .err_handler = { on_err, "server" } };
    ucp_ep_h ep; s = ucp_ep_create(worker, &ep_p, &ep); if (s != UCS_OK) die("accept", s);
    size_t msg_len = 16 + rkey_len; char *msg = malloc(msg_len);
    uint64_t addr = (uint64_t)(uintptr_t)mem, len = rkey_len;
    memcpy(msg, &addr, 8); memcpy(msg + 8, &len, 8); memcpy(msg + 16, rkey, rkey_len);
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = noop_send };
    wait_req(ucp_tag_send_nbx(ep, msg, msg_len, KEY_TAG, &rp));
    printf("server: key sent\n"); fflush(stdout);
    size_t rlen = 4u << 20; char *rbuf = malloc(rlen);
    ucp_request_param_t dp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = data_recv };
    long posted = 0;
    for (;;) {
        while (posted - recvs_done < SERVER_RECVS) {
            void *r = ucp_tag_recv_nbx(worker, rbuf, rlen, DATA_TAG, ~0ull, &dp);
            if (UCS_PTR_IS_ERR(r)) die("recv", UCS_PTR_STATUS(r));
            ++posted;
        }
        ucp_worker_progress(worker);
    }
    return 0;
}

/* The initiator: posts N operations of SIZE bytes at once (OP 'tag': ucp_tag_send_nbx, rendezvous for
 * these sizes; OP 'get': ucp_get_nbx from the server's memory), from/into malloc'ed memory that is not
 * registered (MEM 'malloc') or that is ucp_mem_map'ed (MEM 'map'), then progresses until no operation
 * has completed for GIVEUP_MS, and then tears down by CLOSE (force, forcewait, flush, destroy: see the
 * top of the file). Prints "client: survived" when it lives through it. */
static int client(const char *host, int port, const char *op, const char *memkind, int n, size_t size,
                  const char *close_mode, int giveup_ms) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &sa.sin_addr);
    ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
                             .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER, .sockaddr = { (struct sockaddr *)&sa, sizeof sa },
                             .err_mode = UCP_ERR_HANDLING_MODE_PEER, .err_handler = { on_err, "client" } };
    ucp_ep_h ep; ucs_status_t s = ucp_ep_create(worker, &ep_p, &ep); if (s != UCS_OK) die("connect", s);
    char buf[4096];
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = noop_recv };
    wait_req(ucp_tag_recv_nbx(worker, buf, sizeof buf, KEY_TAG, ~0ull, &rp));
    uint64_t addr; memcpy(&addr, buf, 8);
    ucp_rkey_h rkey; s = ucp_ep_rkey_unpack(ep, buf + 16, &rkey); if (s != UCS_OK) die("rkey_unpack", s);

    size_t slots = MAX_POOL / size; if (slots > (size_t)n) slots = n; if (slots == 0) slots = 1;
    char *pool = malloc(slots * size); memset(pool, 0x5a, slots * size);
    ucp_mem_h memh = NULL;
    if (!strcmp(memkind, "map")) map(pool, slots * size, &memh);
    int is_get = !strcmp(op, "get");
    size_t rslots = REGION / size; if (rslots == 0) rslots = 1;
    void **reqs = calloc(n, sizeof *reqs);
    ucp_request_param_t pp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = op_done };
    if (memh) { pp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH; pp.memh = memh; }
    for (int i = 0; i < n; i++) {
        char *p = pool + (i % slots) * size;
        void *r = is_get ? ucp_get_nbx(ep, p, size, addr + (i % rslots) * size, rkey, &pp)
                         : ucp_tag_send_nbx(ep, p, size, DATA_TAG, &pp);
        if (r == NULL) ++ops_done;
        else if (UCS_PTR_IS_ERR(r)) { ++ops_failed; printf("client: post: %s\n", ucs_status_string(UCS_PTR_STATUS(r))); }
        else reqs[i] = r;
    }
    printf("client: posted %d %s of %zu B from %s memory\n", n, op, size, memkind); fflush(stdout);
    long last_done = -1; double last_progress = now();
    while (ops_done + ops_failed < n) {
        ucp_worker_progress(worker);
        double t = now();
        if (ops_done != last_done) { last_done = ops_done; last_progress = t; }
        if (t - last_progress > giveup_ms / 1e3) break;
    }
    printf("client: %ld done, %ld failed, %ld in flight; closing (%s)\n", ops_done, ops_failed,
           n - ops_done - ops_failed, close_mode); fflush(stdout);
    if (strcmp(close_mode, "destroy")) {
        ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                   .flags = strncmp(close_mode, "force", 5) ? 0 : UCP_EP_CLOSE_FLAG_FORCE };
        void *cr = ucp_ep_close_nbx(ep, &cp);
        if (UCS_PTR_IS_PTR(cr)) {
            double until = now() + 5;   /* a flushing close may never end: the peer is stopped */
            while (ucp_request_check_status(cr) == UCS_INPROGRESS && now() < until) ucp_worker_progress(worker);
            printf("client: close request: %s\n", ucs_status_string(ucp_request_check_status(cr)));
            if (ucp_request_check_status(cr) != UCS_INPROGRESS) ucp_request_free(cr);
        } else {
            printf("client: close: %s\n", ucs_status_string(UCS_PTR_STATUS(cr)));
        }
        printf("client: endpoint closed (%ld done, %ld failed)\n", ops_done, ops_failed); fflush(stdout);
        if (!strcmp(close_mode, "forcewait")) {   /* progress 1 s more before destroying the worker */
            for (double until = now() + 1; now() < until; ) ucp_worker_progress(worker);
            printf("client: after 1 s more progress: %ld done, %ld failed\n", ops_done, ops_failed); fflush(stdout);
        }
    }
    for (int i = 0; i < n; i++) if (reqs[i] && ucp_request_check_status(reqs[i]) != UCS_INPROGRESS) { ucp_request_free(reqs[i]); reqs[i] = NULL; }
    ucp_rkey_destroy(rkey);
    if (memh) ucp_mem_unmap(ctx, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    printf("client: survived\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: see the top of the file\n"); return 2; }
    init();
    if (!strcmp(argv[1], "server")) return server(argc > 2 ? atoi(argv[2]) : 13337);
    if (!strcmp(argv[1], "client") && argc >= 4)
        return client(argv[2], atoi(argv[3]), argc > 4 ? argv[4] : "tag", argc > 5 ? argv[5] : "malloc",
                      argc > 6 ? atoi(argv[6]) : 128, argc > 7 ? strtoul(argv[7], NULL, 0) : (2u << 20),
                      argc > 8 ? argv[8] : "force", argc > 9 ? atoi(argv[9]) : 1000);
    return 2;
}
