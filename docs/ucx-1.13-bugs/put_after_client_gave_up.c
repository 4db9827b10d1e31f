/*
 * UCX 1.13.1: a server aborts on put data that reaches it after its client gave up on the endpoint.
 *
 *   gcc -O2 -Wall put_after_client_gave_up.c -o put_after_client_gave_up -lucp -lucs
 *   ./put_after_client_gave_up server [PORT [DEADLINE_S]]        # PORT 13337, DEADLINE_S 30
 *   ./put_after_client_gave_up client HOST PORT [SIZE [OUTSTANDING [GIVEUP_MS [LINGER_S]]]]
 *   sudo sh put_after_client_gave_up.sh stop 20 65536 64 1000    # the whole experiment, two "hosts"
 *
 * The server accepts one client from a ucp_listener connection request (UCP_ERR_HANDLING_MODE_PEER,
 * error callback set), registers 64 MiB of malloc'ed memory with ucp_mem_map, sends the address and
 * the packed rkey in a tag message, and then only progresses its worker. It exits 0 and prints
 * "survived" 3 s after its error callback (or after DEADLINE_S). The client (PEER mode too) unpacks the
 * rkey and keeps OUTSTANDING ucp_put_nbx of SIZE bytes in flight into that memory. When no put has
 * completed for GIVEUP_MS it gives up: it force-closes the endpoint (ucp_ep_close_nbx with
 * UCP_EP_CLOSE_FLAG_FORCE; the in-flight puts complete with "Request canceled"), waits LINGER_S,
 * destroys its worker and exits. Both sides run with UCX's defaults: no UCX_* variable is set on
 * either side (the client's giving up is its own 1 s timer, not a UCX setting).
 *
 * The driver puts client and server in two network namespaces joined by a veth pair, each in its own
 * UTS and IPC namespace, so UCX takes them for two hosts and uses TCP only (no shm, no cma; all puts
 * are software RMA over active messages, each one answered by the server with a completion message).
 * 'stop': 0.5 s into the puts the server is SIGSTOPped; the client's puts stop completing, it gives up,
 * closes, exits; 0.5 s later the server gets SIGCONT. 'link': instead of stopping the server, the
 * client's side of the link is taken down (ip -n hA link set vA down) and brought up PAUSE_S after the
 * client exited. On UCX 1.13.1 (Debian 12's libucx0, kernel 6.18) the server then aborts:
 *
 *   server: error callback: Endpoint timeout
 *   [hostb:3639 :0:3639] ucp_request.inl:346  Fatal: unexpected error: Endpoint timeout
 *   ==== backtrace (tid:   3639) ====
 *    0  libucs.so.0(ucs_handle_error+0x2dc)
 *    1  libucs.so.0(ucs_fatal_error_message+0xb6)
 *    2  libucs.so.0(ucs_fatal_error_format+0xe1)
 *    3  libucp.so.0(+0x69ca4)                  (ucp_rma_sw_send_cmpl -> ucp_request_send, inlined)
 *    4  libucp.so.0(ucp_put_handler+0x6b)
 *    5  libuct.so.0(+0x21040)                  (static: the TCP receive path invoking the AM handler)
 *    6  libuct.so.0(+0x242fd)
 *    7  libucs.so.0(ucs_event_set_wait+0xe1)
 *    8  libuct.so.0(uct_tcp_iface_progress+0x7b)
 *    9  libucp.so.0(ucp_worker_progress+0x72)
 *   10  put_after_client_gave_up(+0x1a64)      (the server's progress loop)
 *
 * It is SIGABRT (exit status 134) in the main thread, in every crash seen; no segfault was seen. What
 * happens (from one run of the server with UCX_LOG_LEVEL=debug, 'stop', 1 MiB): on SIGCONT the server
 * reads the put data still queued on its one TCP connection (fd 20, Tx:Rx) and answers each put
 * (ucp_put_handler -> ucp_rma_sw_send_cmpl). The client's kernel answers the first answer with a RST
 * (the client's socket is closed), so a later send fails: "tcp_ep ... send(20) failed: Connection reset
 * by remote peer"; the TCP transport fails the endpoint, which calls UCP's error handling at once
 * (set_ep_failed, discarding lanes, then the user's error callback: so "error callback: Endpoint
 * timeout" is printed just before the abort), and then returns UCS_ERR_ENDPOINT_TIMEOUT from the send
 * (tcp_ep.c: "Translate the error to EP timeout error"). ucp_request_try_send accepts only OK,
 * INPROGRESS and NO_RESOURCE and calls ucs_fatal on anything else. rma_peer_death.c is the same abort
 * in ucp_get_req_handler; here the client did nothing wrong: it only gave up on an endpoint.
 *
 * Measured 2026-12-01 on a 2-vCPU machine shared with another CPU-heavy job (runs under nice -n 10),
 * GIVEUP_MS 1000, LINGER_S 0 unless said:
 *
 *   variant  SIZE      OUTSTANDING  pause   server aborted
 *   stop     64 KiB    64           0.5 s   2 / 2, then 15 / 20, then 3 / 3 (final check)
 *   stop     8 B       64           0.5 s   8 / 10
 *   stop     8 B       1024         0.5 s   10 / 10
 *   stop     1 MiB     16           0.5 s   10 / 10 (and 1 / 1 with UCX_LOG_LEVEL=debug on the server)
 *   stop     64 KiB    64 (LINGER_S 3: the client process stays alive) 5 / 5
 *   link     64 KiB    64           0.5 s   0 / 10
 *   link     64 KiB    64           0.8 s   0 / 6
 *   link     64 KiB    64           1.0 s   2 / 5, then 2 / 10
 *   link     64 KiB    64           1.2 s   1 / 6
 *   link     64 KiB    64           2.5 s   0 / 5
 *   link     64 KiB    64           4 s     0 / 6
 *
 * Every abort was the one above, always right after the server's own error callback. A run that
 * survived saw its error callback too and no abort. The link variant depends on which retransmits first
 * after the link is back: the put data (then the same abort) or the client's closing of the connection
 * (then the server fails the endpoint quietly and later data is refused); the stop variant has the put
 * data already queued in the server's socket, so it is the reliable one. No server-side setting avoids
 * it: what the server receives, and when, is up to the client and the network.
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
#define KEY_TAG 0x1234ull

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_conn_request_h pending_conn;
static int peer_failed;
static long puts_done, puts_failed;

static void die(const char *what, ucs_status_t s) { fprintf(stderr, "%s: %s\n", what, ucs_status_string(s)); exit(1); }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; pending_conn = req; }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t s) {
    (void)ep; printf("%s: error callback: %s\n", (const char *)arg, ucs_status_string(s)); fflush(stdout); peer_failed = 1;
}
static void noop_send(void *r, ucs_status_t s, void *u) { (void)r; (void)s; (void)u; }
static void noop_recv(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u) { (void)r; (void)s; (void)i; (void)u; }
static void put_done(void *r, ucs_status_t s, void *u) {
    (void)u; if (s == UCS_OK) ++puts_done; else ++puts_failed;
    ucp_request_free(r);
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

/* Accepts one client, registers REGION bytes of malloc'ed memory, sends the client the address and the
 * packed rkey, then only progresses. Exits 0 ("survived") 3 s after its error callback, or after
 * `deadline` seconds in all. */
static int server(int port, double deadline) {
    void *mem = malloc(REGION); memset(mem, 7, REGION);
    ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                .address = mem, .length = REGION };
    ucp_mem_h memh; ucs_status_t s = ucp_mem_map(ctx, &mp, &memh); if (s != UCS_OK) die("mem_map", s);
    void *rkey; size_t rkey_len; s = ucp_rkey_pack(ctx, memh, &rkey, &rkey_len); if (s != UCS_OK) die("rkey_pack", s);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof sa }, .conn_handler = { on_conn, NULL } };
    ucp_listener_h listener; s = ucp_listener_create(worker, &lp, &listener); if (s != UCS_OK) die("listen", s);
    printf("server: listening on %d, pid %d\n", port, (int)getpid()); fflush(stdout);
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

    double start = now(), next = start, failed_at = 0;
    for (;;) {
        ucp_worker_progress(worker);
        double t = now();
        if (peer_failed && failed_at == 0) failed_at = t;
        if (failed_at != 0 && t > failed_at + 3) { printf("server: survived (after its error callback)\n"); break; }
        if (t > start + deadline) { printf("server: survived (deadline, %s error callback)\n", peer_failed ? "after an" : "no"); break; }
        if (t >= next) { printf("server: alive %.0f s\n", t - start); fflush(stdout); next += 1; }
    }
    return 0;
}

/* Puts `size`-byte messages at the server, `nout` of them outstanding at all times, until no put has
 * completed for `giveup_ms` (or its error callback fires); then force-closes the endpoint and, with
 * `linger_s` > 0, stays alive that long (progressing) before it destroys the worker and exits. */
static int client(const char *host, int port, size_t size, int nout, int giveup_ms, double linger_s) {
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
    char *src = malloc(size); memset(src, 0x5a, size);
    size_t slots = REGION / size;
    printf("client: putting %zu B, %d outstanding\n", size, nout); fflush(stdout);

    ucp_request_param_t pp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = put_done };
    long posted = 0, last_done = -1; double last_progress = now(), next_print = now() + 1;
    while (!peer_failed) {
        while (posted - puts_done - puts_failed < nout) {
            void *r = ucp_put_nbx(ep, src, size, addr + (posted % slots) * size, rkey, &pp);
            ++posted;
            if (r == NULL) ++puts_done;
            else if (UCS_PTR_IS_ERR(r)) { ++puts_failed; printf("client: put: %s\n", ucs_status_string(UCS_PTR_STATUS(r))); }
        }
        ucp_worker_progress(worker);
        double t = now();
        if (puts_done != last_done) { last_done = puts_done; last_progress = t; }
        if (t - last_progress > giveup_ms / 1e3) break;
        if (t > next_print) { printf("client: %ld puts done\n", puts_done); fflush(stdout); next_print += 1; }
    }
    printf("client: giving up: %ld puts posted, %ld done, %ld failed; force-closing the endpoint\n",
           posted, puts_done, puts_failed); fflush(stdout);
    ucp_rkey_destroy(rkey);
    ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
    void *cr = ucp_ep_close_nbx(ep, &cp);
    if (UCS_PTR_IS_PTR(cr)) { while (ucp_request_check_status(cr) == UCS_INPROGRESS) ucp_worker_progress(worker); ucp_request_free(cr); }
    printf("client: endpoint closed (%ld done, %ld failed)\n", puts_done, puts_failed); fflush(stdout);
    for (double until = now() + linger_s; now() < until; ) { ucp_worker_progress(worker); usleep(1000); }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    printf("client: exiting\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: see the top of the file\n"); return 2; }
    init();
    if (!strcmp(argv[1], "server")) return server(argc > 2 ? atoi(argv[2]) : 13337, argc > 3 ? atof(argv[3]) : 30);
    if (!strcmp(argv[1], "client") && argc >= 4)
        return client(argv[2], atoi(argv[3]), argc > 4 ? strtoul(argv[4], NULL, 0) : 65536, argc > 5 ? atoi(argv[5]) : 64,
                      argc > 6 ? atoi(argv[6]) : 1000, argc > 7 ? atof(argv[7]) : 0);
    return 2;
}
