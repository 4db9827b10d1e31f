/* UCX 1.13.1: a 0-byte stream message makes the RECEIVER assert (stream_recv.c:442,
 * `rdesc_tmp.length > 0'), so any peer can abort a stream receiver with an empty send.
 * gcc stream_empty_message.c -lucp -lucs && ./a.out   -> "Assertion `rdesc_tmp.length > 0' failed", SIGABRT
 * (UCX_TLS=tcp ./a.out too). One process, two workers (sender and receiver) over one endpoint pair: the
 * receiving worker asserts as soon as progress hands it the empty message, before any receive is posted.
 * ucxx-ts never sends an empty stream message: streamSend of 0 bytes completes at once. */
#include <ucp/api/ucp.h>
#include <stdio.h>
#include <string.h>
static void send_cb(void *r, ucs_status_t s, void *u) {}
static void recv_cb(void *r, ucs_status_t s, size_t n, void *u) { printf("received %zu bytes, status %d\n", n, (int)s); }
static void wait2(ucp_worker_h a, ucp_worker_h b, void *r) {
  if (r == NULL) return; if (UCS_PTR_IS_ERR(r)) { printf("err %d\n", (int)UCS_PTR_STATUS(r)); return; }
  while (ucp_request_check_status(r) == UCS_INPROGRESS) { ucp_worker_progress(a); ucp_worker_progress(b); }
  ucp_request_free(r);
}
int main() {
  ucp_params_t p = {0}; p.field_mask = UCP_PARAM_FIELD_FEATURES; p.features = UCP_FEATURE_STREAM;
  ucp_context_h ctx; ucp_config_t *cfg; ucp_config_read(NULL, NULL, &cfg); ucp_init_version(1, 13, &p, cfg, &ctx);
  ucp_worker_params_t wp = {0}; ucp_worker_h tx, rx; ucp_worker_create(ctx, &wp, &tx); ucp_worker_create(ctx, &wp, &rx);
  ucp_address_t *ta, *ra; size_t tl, rl; ucp_worker_get_address(tx, &ta, &tl); ucp_worker_get_address(rx, &ra, &rl);
  ucp_ep_params_t ep_p = {0}; ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ucp_ep_h to_rx, to_tx; ep_p.address = ra; ucp_ep_create(tx, &ep_p, &to_rx); ep_p.address = ta; ucp_ep_create(rx, &ep_p, &to_tx);
  ucp_request_param_t fp = {0}; wait2(tx, rx, ucp_ep_flush_nbx(to_rx, &fp)); wait2(tx, rx, ucp_ep_flush_nbx(to_tx, &fp));
  /* sender: a 0-byte stream message, then one byte */
  char one = 'x', buf[16];
  ucp_request_param_t sp = {0}; sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK; sp.cb.send = send_cb;
  wait2(tx, rx, ucp_stream_send_nbx(to_rx, buf, 0, &sp));
  wait2(tx, rx, ucp_stream_send_nbx(to_rx, &one, 1, &sp));
  printf("sent 0 bytes, then 1 byte\n"); fflush(stdout);
  /* not reached on 1.13.1: the receiving worker asserted while the sends were progressed */
  ucp_request_param_t rp = {0}; rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK; rp.cb.recv_stream = recv_cb;
  size_t n = 0; void *r = ucp_stream_recv_nbx(to_tx, buf, sizeof(buf), &n, &rp);
  if (r == NULL) printf("received %zu bytes at once\n", n); else wait2(tx, rx, r);
  printf("no assertion: this UCX does not have the bug\n");
  return 0;
}
