/*
 * UCX 1.13.1: a rendezvous message that the worker still holds after the endpoint it came through was
 * destroyed aborts the process when it is matched or released.
 *
 *   gcc -O2 -Wall rndv_after_ep_destroy.c -o rndv_after_ep_destroy -lucp -lucs
 *   ./rndv_after_ep_destroy tag       # unexpected 4 MiB tag message, ep closed, then ucp_tag_recv_nbx
 *   ./rndv_after_ep_destroy am        # 1 MiB AM kept by its handler (UCS_INPROGRESS), ep closed, then
 *                                     # ucp_am_data_release
 *   ./rndv_after_ep_destroy am-recv   # the same, then ucp_am_recv_data_nbx
 *
 * One process, two workers of one context: B listens, A connects (client-server, UCX's default error
 * mode NONE on both sides) and sends one rendezvous message; B progresses until it holds the message,
 * closes its endpoint to A (a graceful ucp_ep_close_nbx, completed), and then touches the message.
 * Measured 2026-12-03, 10 of 10 runs of each mode abort:
 *
 *   ucp_worker.inl:92  Assertion `(*ep_p)->worker == worker' failed
 *     ucp_worker_get_ep_by_id <- ucp_rndv_receive <- ucp_tag_recv_nbx        (tag)
 *     ucp_worker_get_ep_by_id <- ucp_am_rndv_send_ats <- ucp_am_data_release  (am)
 *
 * The held message names B's endpoint by its address (the "ep id" UCX puts in the rendezvous header):
 * with UCX_PROTO_INDIRECT_ID=auto, the default, ids are addresses unless the endpoint is in PEER error
 * mode, and B looks the freed address up. With UCX_PROTO_INDIRECT_ID=on (or PEER mode) the lookup fails
 * and UCX drops the message (0 of 10 abort). ucxx-ts does not set that: it makes a NONE-mode sender
 * that closes with rendezvous sends in flight abort in ucp_worker_destroy (ucp_ep.c:437, proto_reqs not
 * empty), 8 of 8 through ucxx-ts. Instead ucxx-ts keeps the ucp_ep of a failed endpoint while the worker
 * holds rendezvous messages (Worker[kParkIfHeld] in src/worker.ts): the peer is gone, so UCX fails what
 * is matched to it (ENDPOINT_TIMEOUT) instead of reading freed memory.
 */
#include <ucp/api/ucp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) { fprintf(stderr, "%s: %s\n", #x, ucs_status_string(s_)); exit(1); } } while (0)
#define AM_ID 7

static ucp_worker_h wa, wb;
static ucp_ep_h accepted;
static void *held_data;
static int held;

static void progress(void) { ucp_worker_progress(wa); ucp_worker_progress(wb); }

static void wait_req(void *r) {
    if (r == NULL) return;
    if (UCS_PTR_IS_ERR(r)) { fprintf(stderr, "request: %s\n", ucs_status_string(UCS_PTR_STATUS(r))); return; }
    while (ucp_request_check_status(r) == UCS_INPROGRESS) progress();
    printf("request done: %s\n", ucs_status_string(ucp_request_check_status(r)));
    ucp_request_free(r);
}

static void on_conn(ucp_conn_request_h req, void *arg) {
    ucp_ep_params_t p = { .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = req };
    CHECK(ucp_ep_create(wb, &p, &accepted));
}

static ucs_status_t on_am(void *arg, const void *h, size_t hl, void *data, size_t len, const ucp_am_recv_param_t *p) {
    held_data = data;
    held = 1;
    return (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_INPROGRESS : UCS_OK;
}

static void noop_send(void *r, ucs_status_t s, void *u) {}
static void noop_recv(void *r, ucs_status_t s, const ucp_tag_recv_info_t *i, void *u) {}
static void noop_am_recv(void *r, ucs_status_t s, size_t l, void *u) {}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "tag";
    int am = strncmp(mode, "am", 2) == 0;
    size_t size = am ? (1 << 20) : (4 << 20);
    ucp_params_t cp = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG | UCP_FEATURE_AM };
    ucp_context_h ctx;
    CHECK(ucp_init(&cp, NULL, &ctx));
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE };
    CHECK(ucp_worker_create(ctx, &wp, &wa));
    CHECK(ucp_worker_create(ctx, &wp, &wb));
    ucp_am_handler_param_t ah = { .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB,
                                  .id = AM_ID, .cb = on_am };
    CHECK(ucp_worker_set_am_recv_handler(wb, &ah));

    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ucp_listener_params_t lp = { .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                 .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) }, .conn_handler = { on_conn, NULL } };
    ucp_listener_h listener;
    CHECK(ucp_listener_create(wb, &lp, &listener));
    ucp_listener_attr_t la = { .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR };
    CHECK(ucp_listener_query(listener, &la));
    sa.sin_port = ((struct sockaddr_in *)&la.sockaddr)->sin_port;

    ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
                           .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER, .sockaddr = { (struct sockaddr *)&sa, sizeof(sa) } };
    ucp_ep_h client;
    CHECK(ucp_ep_create(wa, &ep, &client));
    ucp_request_param_t rp = { .op_attr_mask = 0 };
    wait_req(ucp_ep_flush_nbx(client, &rp));
    while (accepted == NULL) progress();

    char *data = malloc(size);
    memset(data, 0x5a, size);
    ucp_request_param_t sp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.send = noop_send };
    void *send = am ? ucp_am_send_nbx(client, AM_ID, NULL, 0, data, size, &sp) : ucp_tag_send_nbx(client, data, size, 1, &sp);
    ucp_tag_recv_info_t info;
    for (int i = 0; i < 200000; i++) {
        progress();
        if (am ? held : ucp_tag_probe_nb(wb, 0, 0, 0, &info) != NULL) break;
    }
    printf("B holds the %s message (%zu bytes)\n", am ? "active" : "unexpected tag", size);

    ucp_request_param_t closep = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = 0 };
    wait_req(ucp_ep_close_nbx(accepted, &closep));
    printf("B closed its endpoint; now touching the message\n");
    fflush(stdout);

    char *dest = malloc(size);
    if (strcmp(mode, "am") == 0) {
        ucp_am_data_release(wb, held_data);
    } else if (strcmp(mode, "am-recv") == 0) {
        ucp_request_param_t ap = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv_am = noop_am_recv };
        wait_req(ucp_am_recv_data_nbx(wb, held_data, dest, size, &ap));
    } else {
        ucp_request_param_t tp = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK, .cb.recv = noop_recv };
        wait_req(ucp_tag_recv_nbx(wb, dest, size, 0, 0, &tp));
    }
    printf("survived\n");
    (void)send;
    return 0;
}
