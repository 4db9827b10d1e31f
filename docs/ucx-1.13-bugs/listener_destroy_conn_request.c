/*
 * UCX 1.13.1: destroying a listener while a client's connection is accepted but its connection data has
 * not arrived yet lets that data crash the process later, in UCX's async thread.
 *
 *   gcc -O2 listener_destroy_conn_request.c -o listener_destroy_conn_request -lucp -lucs
 *   ./listener_destroy_conn_request late           # one raw TCP client, its data sent after the destroy
 *   ./listener_destroy_conn_request close          # the same client closes instead: no crash
 *   ./listener_destroy_conn_request race [N]       # N (default 2000) real UCP clients, listener destroyed at once
 *
 * The TCP connection manager (tcp_listener.c) accepts a connection in the async thread and creates a
 * server-side sockcm endpoint that points back at its listener. The endpoint is on the cm's list, not the
 * listener's: ucp_listener_destroy (uct_tcp_listener_t's cleanup only removes the listen fd's handler)
 * frees the listener and leaves the endpoint waiting for the client's data. When the data arrives,
 * uct_tcp_sockcm_ep_server_invoke_conn_req_cb calls cep->listener->conn_request_cb with the freed
 * listener (and ucp_cm_server_conn_request_cb reads the freed ucp_listener_t). A connection that closes
 * before sending is safe: the endpoint then closes itself without touching the listener.
 *
 * 'late' plays the client with a plain socket, so the window is held open: connect, let the async thread
 * accept, destroy the listener, then send the 16-byte sockcm header (length 0). Expected on 1.13.1:
 *
 *   Caught signal 11 (Segmentation fault: address not mapped to object at address ...)
 *     ucp_cm_server_conn_request_cb <- uct_tcp_sockcm_ep_recv <- uct_tcp_sa_data_handler
 *
 * (6 runs of 6 on Debian 12's glibc, the fault address being the freed chunk's mangled free-list
 * pointer). 'race' is the everyday form: a real client connects and the listener is destroyed while the
 * connection is being set up; 2 runs of 3 (2000 tries each) crashed the same way. Any remote client
 * can hit it against a server whose listener closes while it connects; a process that exits while a
 * connection to it is in flight hits it in its own teardown. A program that prints "survived" did not
 * crash.
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

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_listener_h listener;
static int requests;

static void die(const char *what, ucs_status_t s) { fprintf(stderr, "%s: %s\n", what, ucs_status_string(s)); exit(1); }
static void on_conn(ucp_conn_request_h req, void *arg) { (void)arg; ++requests; ucp_listener_reject(listener, req); }
static void on_err(void *arg, ucp_ep_h ep, ucs_status_t s) { (void)arg; (void)ep; (void)s; }

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void progress_for(double seconds) { double until = now() + seconds; while (now() < until) ucp_worker_progress(worker); }

static int listen_on_loopback(void) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof sa }, .conn_handler = { on_conn, NULL } };
    ucs_status_t s = ucp_listener_create(worker, &lp, &listener); if (s != UCS_OK) die("listen", s);
    ucp_listener_attr_t la = { .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR }; ucp_listener_query(listener, &la);
    return ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port);
}

static int raw_client(int send_late) {
    int port = listen_on_loopback();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { perror("connect"); return 1; }
    progress_for(0.2);   /* the async thread accepts the connection and waits for its data */
    ucp_listener_destroy(listener);
    printf("listener destroyed with one accepted connection waiting for its data\n"); fflush(stdout);
    if (send_late) {
        unsigned char hdr[16] = {0};   /* uct_tcp_sockcm_priv_data_hdr_t: size_t length = 0, uint8_t status */
        if (send(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) { perror("send"); return 1; }
        printf("client: connection data sent\n"); fflush(stdout);
    } else {
        close(fd);
        printf("client: closed without sending\n"); fflush(stdout);
    }
    progress_for(0.5);
    printf("survived\n");
    return 0;
}

static int race(int n) {
    for (int i = 0; i < n; i++) {
        int port = listen_on_loopback();
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        ucp_ep_params_t ep_p = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
                                 .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER, .sockaddr = { (struct sockaddr *)&sa, sizeof sa },
                                 .err_mode = UCP_ERR_HANDLING_MODE_PEER, .err_handler = { on_err, NULL } };
        ucp_ep_h ep; ucs_status_t s = ucp_ep_create(worker, &ep_p, &ep); if (s != UCS_OK) die("connect", s);
        /* a varying short delay, so that some tries destroy the listener between accept and data */
        double until = now() + (i % 50) * 2e-6;
        while (now() < until) ucp_worker_progress(worker);
        ucp_listener_destroy(listener);
        ucp_request_param_t cp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
        void *r = ucp_ep_close_nbx(ep, &cp);
        if (UCS_PTR_IS_PTR(r)) { while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker); ucp_request_free(r); }
        progress_for(0.002);
    }
    printf("%d tries, %d requests delivered and rejected\nsurvived\n", n, requests);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: see the top of the file\n"); return 2; }
    ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG };
    ucp_config_t *cfg;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg); if (s != UCS_OK) die("config", s);
    s = ucp_init(&p, cfg, &ctx); if (s != UCS_OK) die("init", s);
    ucp_config_release(cfg);
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    s = ucp_worker_create(ctx, &wp, &worker); if (s != UCS_OK) die("worker", s);
    if (!strcmp(argv[1], "late")) return raw_client(1);
    if (!strcmp(argv[1], "close")) return raw_client(0);
    if (!strcmp(argv[1], "race")) return race(argc > 2 ? atoi(argv[2]) : 2000);
    return 2;
}
