/* UCX 1.13.1: fetching AND/OR/XOR over shared memory use the wrong operand.
 * gcc amo_fetch_bitwise.c -lucp -lucs && UCX_TLS=sm ./a.out   -> "and fetch: old 12 now 12" (expected 8)
 * UCX_TLS=tcp ./a.out gives the right answers. ucxx-ts builds these ops from fetch-add and cswap. */
#include <ucp/api/ucp.h>
#include <stdio.h>
#include <string.h>
static void cb(void *r, ucs_status_t s, void *u) {}
static void wait(ucp_worker_h w, void *r) { if (r == NULL) return; if (UCS_PTR_IS_ERR(r)) { printf("err %d\n", (int)UCS_PTR_STATUS(r)); return; } while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(w); ucp_request_free(r); }
int main() {
  ucp_params_t p = {0}; p.field_mask = UCP_PARAM_FIELD_FEATURES; p.features = UCP_FEATURE_AMO64 | UCP_FEATURE_RMA;
  ucp_context_h ctx; ucp_config_t *cfg; ucp_config_read(NULL, NULL, &cfg); ucp_init_version(1, 13, &p, cfg, &ctx);
  ucp_worker_params_t wp = {0}; ucp_worker_h w; ucp_worker_create(ctx, &wp, &w);
  ucp_address_t *a; size_t al; ucp_worker_get_address(w, &a, &al);
  ucp_ep_params_t ep_p = {0}; ep_p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS; ep_p.address = a; ucp_ep_h ep; ucp_ep_create(w, &ep_p, &ep);
  ucp_mem_map_params_t mp = {0}; mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS; mp.length = 4096; mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h mh; ucp_mem_map(ctx, &mp, &mh); ucp_mem_attr_t at = {0}; at.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS; ucp_mem_query(mh, &at);
  void *rb; size_t rs; ucp_rkey_pack(ctx, mh, &rb, &rs); ucp_rkey_h rk; ucp_ep_rkey_unpack(ep, rb, &rk);
  uint64_t *word = at.address;
  const char *names[] = {"add","swap","cswap","and","or","xor"};
  for (int op = 0; op < 6; op++) { if (op == 2) continue;
    *word = 12; uint64_t val = 10, res = 0;
    ucp_request_param_t rp = {0}; rp.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER | UCP_OP_ATTR_FIELD_CALLBACK; rp.datatype = ucp_dt_make_contig(8); rp.reply_buffer = &res; rp.cb.send = cb;
    wait(w, ucp_atomic_op_nbx(ep, op, &val, 1, (uint64_t)word, rk, &rp));
    ucp_request_param_t fp = {0}; wait(w, ucp_ep_flush_nbx(ep, &fp));
    printf("%s fetch: old %lu now %lu\n", names[op], res, *word);
  }
  return 0;
}
