/*
 * stream_receive: 1 MiB stream_bw in plain libucp with the receive posted one of two ways, for
 * bench/stream-receive.ts, which runs it beside ucx_perftest and ucxx-ts.
 *
 *   stream_receive server DIR N WARMUP SIZE waitall|partial
 *   stream_receive client DIR N WARMUP SIZE
 *
 * The client keeps 32 sends of SIZE bytes in flight (ucx_perftest's stream_bw with -O 32) and, after
 * the server's one-byte answer, prints {"bandwidth_MBps": ...}, timed from the first measured send.
 * The server receives each message whole into one buffer:
 *   waitall  one ucp_stream_recv_nbx with UCP_STREAM_RECV_FLAG_WAITALL per message (what ucxx and
 *            ucxx-ts's streamRecv(..., { waitAll: true }) post);
 *   partial  receives without the flag for what is still missing, until the message is whole (what
 *            ucx_perftest's stream_bw does).
 * The server then prints its ucp_worker_progress calls per message, and for partial how many receives
 * returned at once and how many waited. STREAM_RECEIVE_DELAY_NS=N adds a busy loop of about N ns before
 * each progress call (what a call from JavaScript costs more than one from C), to see what that costs.
 * Both sides exchange worker addresses through files in DIR, as ucx_perftest exchanges them through its
 * socket, and each makes an endpoint to the other; error handling NONE, the context's only feature
 * STREAM, as ucx_perftest's. Busy-polls ucp_worker_progress; no cleanup beyond a forced close.
 */
#include <ucp/api/ucp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 32
#define CHECK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) { \
  fprintf(stderr, "stream_receive: %s: %s\n", #x, ucs_status_string(s_)); exit(1); } } while (0)

static ucp_worker_h worker;
/* Iterations of an empty loop added before each ucp_worker_progress call (STREAM_RECEIVE_DELAY_NS). */
static long delay_spins;
static long progress_calls;

static void progress(void) {
  for (volatile long i = 0; i < delay_spins; i++) {
  }
  ucp_worker_progress(worker);
  progress_calls++;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Progresses until the request (or NULL: done at once) completes; frees it. Returns its status. */
static ucs_status_t wait_request(void *request) {
  if (request == NULL) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) progress();
  ucp_request_free(request);
  return status;
}

static void write_file(const char *path, const void *data, size_t n) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (f == NULL || fwrite(data, 1, n, f) != n || fclose(f) != 0 || rename(tmp, path) != 0) {
    perror("stream_receive: writing the address");
    exit(1);
  }
}

/* Waits for the peer's address file (written whole by rename). */
static void *read_file(const char *path, size_t *n) {
  FILE *f;
  while ((f = fopen(path, "rb")) == NULL) usleep(1000);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  void *data = malloc((size_t)len);
  if (len <= 0 || data == NULL || fread(data, 1, (size_t)len, f) != (size_t)len) {
    fprintf(stderr, "stream_receive: reading %s failed\n", path);
    exit(1);
  }
  fclose(f);
  *n = (size_t)len;
  return data;
}

int main(int argc, char **argv) {
  if (argc < 6 || (strcmp(argv[1], "server") == 0 && argc < 7)) {
    fprintf(stderr, "usage: stream_receive server DIR N WARMUP SIZE waitall|partial\n"
                    "       stream_receive client DIR N WARMUP SIZE\n");
    return 2;
  }
  int server = strcmp(argv[1], "server") == 0;
  const char *dir = argv[2];
  long n = atol(argv[3]), warmup = atol(argv[4]);
  size_t size = (size_t)atol(argv[5]);
  int partial = server && strcmp(argv[6], "partial") == 0;
  if (n <= 0 || warmup < 0 || size == 0 || (server && !partial && strcmp(argv[6], "waitall") != 0)) {
    fprintf(stderr, "stream_receive: bad arguments\n");
    return 2;
  }

  const char *delay = getenv("STREAM_RECEIVE_DELAY_NS");
  if (delay != NULL && atof(delay) > 0) {
    long calibration = 50000000;
    double t0 = now();
    for (volatile long i = 0; i < calibration; i++) {
    }
    delay_spins = (long)(atof(delay) * 1e-9 * (double)calibration / (now() - t0));
  }

  ucp_params_t cp = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_STREAM };
  ucp_context_h context;
  CHECK(ucp_init(&cp, NULL, &context));
  ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
  CHECK(ucp_worker_create(context, &wp, &worker));

  ucp_address_t *address;
  size_t address_length;
  CHECK(ucp_worker_get_address(worker, &address, &address_length));
  char mine[4096], theirs[4096];
  snprintf(mine, sizeof mine, "%s/%s.addr", dir, server ? "server" : "client");
  snprintf(theirs, sizeof theirs, "%s/%s.addr", dir, server ? "client" : "server");
  write_file(mine, address, address_length);
  size_t remote_length;
  void *remote = read_file(theirs, &remote_length);
  ucp_ep_params_t ep_params = {
    .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
    .address = remote, .err_mode = UCP_ERR_HANDLING_MODE_NONE,
  };
  ucp_ep_h ep;
  CHECK(ucp_ep_create(worker, &ep_params, &ep));

  char *buffer = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (buffer == NULL) return 1;
  memset(buffer, 0x5a, size);
  char answer = 1;
  size_t length;
  ucp_request_param_t waitall = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_STREAM_RECV_FLAG_WAITALL };
  ucp_request_param_t plain = { .op_attr_mask = 0 };

  if (server) {
    long at_once = 0, waited = 0;
    for (long k = 0; k < n + warmup; k++) {
      if (!partial) {
        CHECK(wait_request(ucp_stream_recv_nbx(ep, buffer, size, &length, &waitall)));
        continue;
      }
      size_t total = 0;
      while (total < size) {
        void *request = ucp_stream_recv_nbx(ep, buffer + total, size - total, &length, &plain);
        if (request == NULL) {
          at_once++;
        } else {
          if (UCS_PTR_IS_ERR(request)) CHECK(UCS_PTR_STATUS(request));
          while (ucp_stream_recv_request_test(request, &length) == UCS_INPROGRESS) progress();
          ucp_request_free(request);
          waited++;
        }
        total += length;
      }
    }
    CHECK(wait_request(ucp_stream_send_nbx(ep, &answer, 1, &plain)));
    double messages = (double)(n + warmup);
    printf("{\"progress_calls_per_message\": %.1f, \"receives_at_once_per_message\": %.2f, \"receives_waited_per_message\": %.2f}\n",
           (double)progress_calls / messages, partial ? (double)at_once / messages : 0.0, partial ? (double)waited / messages : 1.0);
  } else {
    void *window[WINDOW] = { NULL };
    double start = 0;
    for (long k = 0; k < n + warmup; k++) {
      if (k == warmup) start = now();
      CHECK(wait_request(window[k % WINDOW]));
      window[k % WINDOW] = ucp_stream_send_nbx(ep, buffer, size, &plain);
      if (UCS_PTR_IS_ERR(window[k % WINDOW])) CHECK(UCS_PTR_STATUS(window[k % WINDOW]));
    }
    for (int i = 0; i < WINDOW; i++) CHECK(wait_request(window[i]));
    CHECK(wait_request(ucp_stream_recv_nbx(ep, &answer, 1, &length, &waitall)));
    printf("{\"bandwidth_MBps\": %.1f}\n", (double)n * (double)size / (now() - start) / 1e6);
  }
  fflush(stdout);
  ucp_request_param_t force = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
  wait_request(ucp_ep_close_nbx(ep, &force));
  ucp_worker_release_address(worker, address);
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
  free(remote);
  free(buffer);
  return 0;
}
