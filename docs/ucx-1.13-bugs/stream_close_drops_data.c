/* UCX 1.13.1: when the peer closes its endpoint GRACEFULLY (ucp_ep_close_nbx, flush mode), the receiver
 * drops every stream byte that has arrived but that no ucp_stream_recv_nbx has taken yet:
 * ucp_ep_set_failed() calls ucp_stream_ep_cleanup() ("drop unmatched data") before the error callback
 * runs, so nothing the application does afterwards can get those bytes back.
 *
 *   gcc stream_close_drops_data.c -lucp -lucs -o scdd
 *   ./scdd queue    -> the receiver posts no receive while the sender sends 1 MiB and closes; UCX held
 *                      the bytes (ucp_stream_worker_poll names the endpoint), then the error callback
 *                      (CONNECTION_RESET) comes and ucp_stream_recv_data_nb finds nothing: 0 of 1048576
 *   ./scdd posted   -> the receiver keeps one receive posted at all times (re-posted from its completion
 *                      callback): all 1048576 bytes arrive, then the error callback
 *
 * Two processes (fork), client-server over 127.0.0.1 (port from argv[2], default 13411), UCX defaults.
 * A stream receiver that only posts its next receive some time after the last one completed (an
 * application that processes each chunk before asking for more) loses what arrived in that gap when
 * the peer closes. ucxx-ts keeps a UCX stream receive posted on every open endpoint (into its own
 * read-ahead buffers when the application has none waiting), so UCX never holds stream bytes of its
 * own that a close could drop. (The receiver's own graceful close at the end logs "error during
 * flush: Endpoint timeout": its peer is gone; that is not what this shows.) */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOTAL (1 << 20)
#define CHUNK (64 * 1024)

static ucp_context_h ctx;
static ucp_worker_h worker;
static ucp_ep_h server_ep;
static volatile int failed, connected;
static size_t received;
static char *rbuf;
static int posted_mode;

static void init(void) {
  ucp_params_t p = {0};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_STREAM;
  ucp_config_t *cfg;
  ucp_config_read(NULL, NULL, &cfg);
  if (ucp_init_version(1, 13, &p, cfg, &ctx) != UCS_OK) exit(2);
  ucp_config_release(cfg);
  ucp_worker_params_t wp = {0};
  if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) exit(2);
}

static void wait_req(void *r) {
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(r);
}

static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t status) {
  printf("receiver: error callback: %s\n", ucs_status_string(status));
  failed = 1;
}

static void post_recv(void);
static void recv_cb(void *req, ucs_status_t status, size_t length, void *user) {
  if (status == UCS_OK) received += length;
  ucp_request_free(req);
  if (status == UCS_OK) post_recv();   /* keep one receive posted */
}

static void post_recv(void) {
  ucp_request_param_t rp = {0};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  rp.cb.recv_stream = recv_cb;
  for (;;) {
    size_t n = 0;
    void *r = ucp_stream_recv_nbx(server_ep, rbuf, CHUNK, &n, &rp);
    if (r == NULL) { received += n; continue; }
    return;   /* in flight (or an error: the endpoint failed) */
  }
}

static void conn_cb(ucp_conn_request_h req, void *arg) {
  ucp_ep_params_t ep_p = {0};
  ep_p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_p.conn_request = req;
  ep_p.err_handler.cb = err_cb;
  if (ucp_ep_create(worker, &ep_p, &server_ep) != UCS_OK) exit(2);
  connected = 1;
}

static void send_cb(void *r, ucs_status_t s, void *u) {}

static int client(int port) {
  init();
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ucp_ep_params_t ep_p = {0};
  ep_p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  ep_p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep_p.sockaddr.addr = (struct sockaddr *)&sa;
  ep_p.sockaddr.addrlen = sizeof(sa);
  ucp_ep_h ep;
  if (ucp_ep_create(worker, &ep_p, &ep) != UCS_OK) return 2;
  char *data = malloc(TOTAL);
  memset(data, 'x', TOTAL);
  ucp_request_param_t sp = {0};
  sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
  sp.cb.send = send_cb;
  wait_req(ucp_stream_send_nbx(ep, data, TOTAL, &sp));
  ucp_request_param_t fp = {0};
  wait_req(ucp_ep_flush_nbx(ep, &fp));
  printf("sender: %d bytes sent and flushed\n", TOTAL);
  fflush(stdout);
  /* let the receiver progress the bytes in before the close, so that UCX holds them there */
  for (int i = 0; i < 200; i++) { ucp_worker_progress(worker); usleep(1000); }
  ucp_request_param_t cp = {0};
  cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  cp.flags = 0;   /* graceful: flush, then disconnect */
  wait_req(ucp_ep_close_nbx(ep, &cp));
  printf("sender: endpoint closed gracefully\n");
  fflush(stdout);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  return 0;
}

int main(int argc, char **argv) {
  int port = argc > 2 ? atoi(argv[2]) : 13411;
  if (argc > 1 && strcmp(argv[1], "client") == 0) return client(port);
  posted_mode = argc > 1 && strcmp(argv[1], "posted") == 0;
  rbuf = malloc(CHUNK);
  init();
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ucp_listener_params_t lp = {0};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = (struct sockaddr *)&sa;
  lp.sockaddr.addrlen = sizeof(sa);
  lp.conn_handler.cb = conn_cb;
  ucp_listener_h listener;
  if (ucp_listener_create(worker, &lp, &listener) != UCS_OK) return 2;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    /* a fresh UCX in the child: exec ourselves as the client */
    execl("/proc/self/exe", argv[0], "client", argc > 2 ? argv[2] : "13411", (char *)NULL);
    _exit(3);
  }
  while (!connected) ucp_worker_progress(worker);
  if (posted_mode) post_recv();
  int held = 0;
  while (!failed) {
    ucp_worker_progress(worker);
    ucp_stream_poll_ep_t ready[4];
    if (!posted_mode && ucp_stream_worker_poll(worker, ready, 4, 0) > 0 && !held) {
      held = 1;
      printf("receiver: UCX holds stream bytes for the endpoint (ucp_stream_worker_poll names it)\n");
    }
  }
  if (!posted_mode) {
    size_t n = 0;
    void *data;
    while ((data = ucp_stream_recv_data_nb(server_ep, &n)) != NULL && !UCS_PTR_IS_ERR(data)) {
      received += n;
      ucp_stream_data_release(server_ep, data);
    }
  }
  printf("receiver: %zu of %d bytes received: %s\n", received, TOTAL,
         received == TOTAL ? "none lost" : "the rest was dropped by UCX");
  int st;
  waitpid(pid, &st, 0);
  ucp_request_param_t cp = {0};
  wait_req(ucp_ep_close_nbx(server_ep, &cp));
  ucp_listener_destroy(listener);
  ucp_worker_destroy(worker);
  ucp_cleanup(ctx);
  return received == TOTAL ? 0 : 1;
}
