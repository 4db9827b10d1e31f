/*
 * UCX v1 protocols (UCX_PROTO_ENABLE=n; seen on 1.20.1 from the libucx-cu12 wheel, same code in 1.13.1):
 * purging an endpoint while a software-emulated FETCHING atomic still waits for its reply dereferences
 * memory registration state that the atomic never initialized:
 *
 *   ucp_worker_progress -> ... -> ucp_worker_discard_uct_ep_complete -> ucp_ep_discard_lanes_callback
 *     -> ucp_ep_reqs_purge -> ucp_ep_req_purge [req->send.uct.func == ucp_amo_sw_proto.progress_fetch]
 *     -> ucp_request_send_buffer_dereg(req) -> ucp_request_memory_dereg(req->send.datatype,
 *        &req->send.state.dt) -> ucp_request_dt_dereg -> ucp_memh_put(stale memh): SIGSEGV
 *
 * ucp_amo_init_common / ucp_amo_init_fetch (src/ucp/rma/amo_send.c) never set req->send.datatype nor
 * req->send.state.dt, so the purge sees whatever the previous user of the request object left there
 * (in the Node cores: datatype 0x10000, i.e. class CONTIG, and memh 0x22). On 1.13.1 state.dt.contig is
 * {md_map, uct memh[]}: the stale md_map makes it deregister garbage from random memory domains.
 *
 * The client makes it deterministic by handing UCX its own request memory (UCP_OP_ATTR_FIELD_REQUEST;
 * UCX uses (ucp_request_t*)param.request - 1, so param.request = base + request_size):
 *   stale  the atomic's request memory is filled like the core: every 64-bit word 0x10000, and the
 *          word at offset 96 (send.state.dt.dt.contig.memh on 1.20.1, .contig.md_map on 1.13.1) 0x22
 *   zero   the same memory zeroed (the workaround: the purge finds CONTIG with memh NULL / md_map 0)
 *   pool   no own memory: UCX's request mpool, dirtied first by a few thousand tag send/recv round
 *          trips (eager and rendezvous, SEED varies the sizes), gets, puts and atomics, all freed
 *
 *   gcc -O2 -Wall purge_fetch_atomic.c -o purge_fetch_atomic -lucp -lucs
 *   UCX_TLS=tcp UCX_PROTO_ENABLE=n ./purge_fetch_atomic server PORT &
 *   UCX_TLS=tcp UCX_PROTO_ENABLE=n ./purge_fetch_atomic client 127.0.0.1 PORT stale|zero|pool [SEED]
 *     (SIGSTOP the server when the client prints "ready")
 *   sh purge_fetch_atomic.sh [LIBDIR] [TRIES]
 *
 * The server (PEER mode) maps 4096 bytes, sends the packed rkey with tag 1, then progresses forever,
 * echoing every tag-2 message back with tag 3. The client (PEER mode) unpacks the rkey, does one
 * fetch-add that completes (in stale/zero mode from its own zeroed request memory), prints "ready",
 * progresses 1 s (the driver stops the server meanwhile; with STOPPED_FLAG=FILE, until FILE exists), posts a 64-bit fetch-add, progresses 200 ms,
 * closes the endpoint with UCP_EP_CLOSE_FLAG_FORCE, progresses until the close completes and prints
 * "survived: atomic completed with <status>".
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define CHECK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) { fprintf(stderr, "%s: %s\n", #x, ucs_status_string(s_)); exit(2); } } while (0)
#define STALE_WORD 0x10000ull /* datatype in the core: ucp_dt_make_contig(8192), class CONTIG */
#define STALE_MEMH 0x22ull    /* memh in the core */
#define MEMH_OFFSET 96        /* offsetof(ucp_request_t, send.state.dt.dt.contig) in 1.13.1 and 1.20.1 */
#define MAX_MSG (1u << 20)

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_conn_request_h conn_req;

static double now(void) { struct timeval tv; gettimeofday(&tv, NULL); return tv.tv_sec + tv.tv_usec / 1e6; }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; conn_req = req; }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t status) { (void)ep; fprintf(stderr, "%s: error handler: %s\n", (char *)arg, ucs_status_string(status)); }
static void on_send(void *req, ucs_status_t status, void *user) { (void)req; *(ucs_status_t *)user = status; }
static void progress_for(double seconds) { double end = now() + seconds; while (now() < end) ucp_worker_progress(worker); }

/* Waits for a UCX-allocated request and frees it; returns its status. */
static ucs_status_t wait_request(void *req, double seconds) {
    if (req == NULL) return UCS_OK;
    if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
    double end = now() + seconds;
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && now() < end) ucp_worker_progress(worker);
    ucp_request_free(req);
    return st;
}

static ucp_tag_recv_info_t recv_info;
static void on_recv(void *req, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user) {
    (void)req; (void)user;
    if (status == UCS_OK) recv_info = *info;
}
static void *tag_recv(void *buf, size_t size, ucp_tag_t tag) {
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = on_recv };
    return ucp_tag_recv_nbx(worker, buf, size, tag, (ucp_tag_t)-1, &p);
}
static void *tag_send(ucp_ep_h ep, const void *buf, size_t size, ucp_tag_t tag) {
    ucp_request_param_t p = { .op_attr_mask = 0 };
    return ucp_tag_send_nbx(ep, buf, size, tag, &p);
}

static ucp_ep_params_t peer_ep_params(const char *who) {
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER, .err_handler = { .cb = on_err, .arg = (void *)who },
    };
    return ep_params;
}

static int run_server(int port) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = { .addr = (struct sockaddr *)&sa, .addrlen = sizeof(sa) }, .conn_handler = { .cb = on_conn },
    };
    ucp_listener_h listener;
    CHECK(ucp_listener_create(worker, &lp, &listener));
    printf("server: listening on %d\n", port); fflush(stdout);
    while (conn_req == NULL) ucp_worker_progress(worker);
    ucp_ep_params_t ep_params = peer_ep_params("server");
    ep_params.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep_params.conn_request = conn_req;
    ucp_ep_h ep;
    CHECK(ucp_ep_create(worker, &ep_params, &ep));

    static uint64_t region[4096 / sizeof(uint64_t)];
    ucp_mem_map_params_t mp = { .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                .address = region, .length = sizeof(region) };
    ucp_mem_h memh;
    CHECK(ucp_mem_map(ctx, &mp, &memh));
    void *rkey_buf; size_t rkey_size;
    CHECK(ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_size));
    size_t msg_size = sizeof(uint64_t) + rkey_size;
    char *msg = malloc(msg_size);
    uint64_t addr = (uintptr_t)region;
    memcpy(msg, &addr, sizeof(addr));
    memcpy(msg + sizeof(addr), rkey_buf, rkey_size);
    CHECK(wait_request(tag_send(ep, msg, msg_size, 1), 10));
    ucp_rkey_buffer_release(rkey_buf);
    printf("server: sent the rkey (%zu bytes), region at 0x%llx\n", rkey_size, (unsigned long long)addr); fflush(stdout);

    /* Echo every tag-2 message back with tag 3, forever (the driver kills the server). */
    char *buf = malloc(MAX_MSG);
    for (;;) {
        memset(&recv_info, 0, sizeof(recv_info));
        void *r = tag_recv(buf, MAX_MSG, 2);
        if (wait_request(r, 1e9) != UCS_OK) continue;
        wait_request(tag_send(ep, buf, recv_info.length, 3), 1e9);
    }
    return 0;
}

/* Runs some thousand operations through UCX's request mpool, leaving freed requests of many kinds. */
static void dirty_pool(ucp_ep_h ep, uint64_t raddr, ucp_rkey_h rkey, unsigned seed) {
    static const size_t sizes[] = { 8, 100, 1000, 8192, 16384, 65536, 262144, 1048576 };
    char *sbuf = malloc(MAX_MSG), *rbuf = malloc(MAX_MSG);
    static char local[4096];
    memset(sbuf, 0x22, MAX_MSG);
    srand(seed);
    int n = 2000 + rand() % 1000, gets = 0, puts = 0, rts = 0, amos = 0;
    for (int i = 0; i < n; i++) {
        int kind = rand() % 5;
        if (kind <= 1) { /* tag round trip: recv posted first, then send, both UCX-allocated */
            size_t size = sizes[rand() % (sizeof(sizes) / sizeof(sizes[0]))];
            /* 64 KiB receive buffers too: the core's datatype word 0x10000 looks like a 65536-byte recv length */
            void *r = tag_recv(rbuf, size <= 65536 && rand() % 2 ? 65536 : MAX_MSG, 3);
            void *s = tag_send(ep, sbuf, size, 2);
            if (rand() % 2) { CHECK(wait_request(s, 10)); CHECK(wait_request(r, 10)); }
            else { CHECK(wait_request(r, 10)); CHECK(wait_request(s, 10)); }
            rts++;
        } else if (kind == 4) { /* atomics: a fetch-add that completes, or a post */
            static uint64_t one = 1, res;
            ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE, .datatype = ucp_dt_make_contig(8) };
            if (rand() % 2) { p.op_attr_mask |= UCP_OP_ATTR_FIELD_REPLY_BUFFER; p.reply_buffer = &res; }
            CHECK(wait_request(ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one, 1, raddr + 8, rkey, &p), 10));
            amos++;
        } else { /* RMA on the server's region, sizes up to 4096 */
            size_t size = 1 + rand() % sizeof(local);
            ucp_request_param_t p = { .op_attr_mask = 0 };
            void *r = kind == 2 ? ucp_get_nbx(ep, local, size, raddr, rkey, &p) : ucp_put_nbx(ep, local, size, raddr, rkey, &p);
            CHECK(wait_request(r, 10));
            if (kind == 2) gets++; else puts++;
        }
    }
    printf("client: dirtied the request pool: %d tag round trips, %d gets, %d puts, %d atomics\n", rts, gets, puts, amos);
    fflush(stdout);
    free(sbuf); free(rbuf);
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "server") != 0 && argc < 5)) {
        fprintf(stderr, "usage: server PORT | client HOST PORT stale|zero|pool [SEED]\n"); return 2;
    }
    int server = strcmp(argv[1], "server") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    ucp_params_t params = { .field_mask = UCP_PARAM_FIELD_FEATURES,
                            .features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO64 };
    CHECK(ucp_init(&params, NULL, &ctx));
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    CHECK(ucp_worker_create(ctx, &wp, &worker));
    if (server) return run_server(atoi(argv[2]));

    const char *mode = argv[4];
    int own = strcmp(mode, "stale") == 0 || strcmp(mode, "zero") == 0;
    if (!own && strcmp(mode, "pool") != 0) { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    unsigned seed = argc > 5 ? (unsigned)atoi(argv[5]) : 1;
    unsigned maj, min, rel;
    ucp_get_version(&maj, &min, &rel);
    ucp_context_attr_t cattr = { .field_mask = UCP_ATTR_FIELD_REQUEST_SIZE };
    CHECK(ucp_context_query(ctx, &cattr));
    printf("client: UCX %u.%u.%u, request_size %zu, mode %s\n", maj, min, rel, cattr.request_size, mode);

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
    inet_pton(AF_INET, argv[2], &sa.sin_addr);
    ucp_ep_params_t ep_params = peer_ep_params("client");
    ep_params.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep_params.sockaddr.addr = (struct sockaddr *)&sa;
    ep_params.sockaddr.addrlen = sizeof(sa);
    ucp_ep_h ep;
    CHECK(ucp_ep_create(worker, &ep_params, &ep));

    char msg[4096];
    CHECK(wait_request(tag_recv(msg, sizeof(msg), 1), 10));
    uint64_t raddr;
    memcpy(&raddr, msg, sizeof(raddr));
    ucp_rkey_h rkey;
    CHECK(ucp_ep_rkey_unpack(ep, msg + sizeof(raddr), &rkey));

    /* Own request memory: the ucp_request_t lies at [base, base + request_size). */
    size_t area = cattr.request_size + 256;
    char *base = aligned_alloc(64, (area + 63) & ~(size_t)63);

    /* 1. A fetch-add that completes: proves atomics (and own request memory, zeroed) work. */
    uint64_t one = 1, result = 0xdead;
    ucs_status_t st1 = UCS_INPROGRESS;
    ucp_request_param_t ap = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                        UCP_OP_ATTR_FIELD_REPLY_BUFFER,
        .cb.send = on_send, .user_data = &st1, .datatype = ucp_dt_make_contig(8), .reply_buffer = &result,
    };
    if (own) {
        memset(base, 0, area);
        ap.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
        ap.request = base + cattr.request_size;
    }
    void *r1 = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one, 1, raddr, rkey, &ap);
    if (UCS_PTR_IS_ERR(r1)) { fprintf(stderr, "client: first atomic: %s\n", ucs_status_string(UCS_PTR_STATUS(r1))); return 2; }
    if (r1 == NULL) st1 = UCS_OK;
    double end = now() + 10;
    while (st1 == UCS_INPROGRESS && now() < end) ucp_worker_progress(worker);
    if (r1 != NULL && !own) ucp_request_free(r1);
    printf("client: first fetch-add (%s request): %s, fetched %llu\n", own ? "own zeroed" : "UCX's",
           ucs_status_string(st1), (unsigned long long)result);
    if (st1 != UCS_OK) return 3;

    if (!own) dirty_pool(ep, raddr, rkey, seed);

    printf("ready\n");
    /* The driver stops the server now; with STOPPED_FLAG set, wait (progressing) until that file exists. */
    const char *flag = getenv("STOPPED_FLAG");
    end = now() + 20;
    while (flag != NULL && access(flag, F_OK) != 0 && now() < end) progress_for(0.01);
    progress_for(flag != NULL ? 0.2 : 1.0);

    /* 2. The fetch-add that the purge finds waiting for its reply. */
    ucs_status_t st2 = UCS_INPROGRESS;
    ap.user_data = &st2;
    ap.op_attr_mask &= ~UCP_OP_ATTR_FIELD_REQUEST;
    if (own) {
        if (strcmp(mode, "zero") == 0) {
            memset(base, 0, area);
        } else {
            for (size_t i = 0; i + 8 <= area; i += 8) *(uint64_t *)(base + i) = STALE_WORD;
            *(uint64_t *)(base + MEMH_OFFSET) = STALE_MEMH;
        }
        ap.op_attr_mask |= UCP_OP_ATTR_FIELD_REQUEST;
        ap.request = base + cattr.request_size;
    }
    void *r2 = ucp_atomic_op_nbx(ep, UCP_ATOMIC_OP_ADD, &one, 1, raddr, rkey, &ap);
    if (UCS_PTR_IS_ERR(r2)) { fprintf(stderr, "client: second atomic: %s\n", ucs_status_string(UCS_PTR_STATUS(r2))); return 2; }
    if (r2 == NULL) st2 = UCS_OK;
    if (r2 != NULL) { /* what the purge will read: send.datatype (offset 40) and send.state.dt (88, 96, 104) */
        const uint64_t *w = (const uint64_t *)((char *)r2 - cattr.request_size);
        printf("client: atomic request %p: datatype 0x%llx, state.dt 0x%llx 0x%llx 0x%llx\n", (void *)w,
               (unsigned long long)w[5], (unsigned long long)w[11], (unsigned long long)w[12], (unsigned long long)w[13]);
    }
    progress_for(0.2);
    printf("client: second fetch-add after 200 ms: %s; forced close\n", ucs_status_string(st2));

    ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
    void *close = ucp_ep_close_nbx(ep, &cp);
    ucs_status_t cst = wait_request(close, 10);
    progress_for(0.2);
    printf("client: close: %s\n", ucs_status_string(cst));
    printf("survived: atomic completed with %s\n", st2 == UCS_INPROGRESS ? "nothing (never completed)" : ucs_status_string(st2));
    if (r2 != NULL && !own) ucp_request_free(r2);
    ucp_rkey_destroy(rkey);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    free(base);
    return 0;
}
