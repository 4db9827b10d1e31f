/*
 * rma_peer: a plain-UCP C program (libucp only, no ucxx-ts code) that does RMA and atomics with ucxx-ts
 * through remote keys in ucxx's serialized format, in both directions, as the server or the client of
 * a client-server connection. Driven by test/rma-interop.test.ts (one host) and
 * test/two-hosts-interop.test.ts (two hosts). It has its own implementation of ucxx's serialized-key
 * format and of its checksum (libstdc++'s std::hash<std::string>), written from UCX-NOTES.md, so that
 * what ucxx-ts writes and reads is checked against an independent reading of the format.
 *
 * Build:  gcc -O2 -Wall -Wextra rma_peer.c -o rma_peer -lucp -lucs
 * Usage:  rma_peer server ADDR ERRMODE DIRECTION       listen on ADDR, port 0; print "PORT <n>";
 *                                                      accept one connection
 *         rma_peer client ADDR PORT ERRMODE DIRECTION  connect to ADDR:PORT
 *         ERRMODE: none | peer: the endpoint's UCP error-handling mode; for a server also any: its
 *                  accepted endpoint names no mode and takes the client's, as UCX's own
 *                  ucp_client_server example does (a server that names a mode refuses a client of
 *                  the other: "asymmetric endpoint configuration").
 *         DIRECTION: c-exposes | ts-exposes | both (c-exposes first).
 *         The program sets no UCX configuration of its own: run it with a clean environment and it runs
 *         with UCX's defaults. Context features: TAG | RMA | AMO32 | AMO64.
 * Result: "OK ..." lines on stdout and exit 0, or one "FAIL <what> (phase: ...)" line and exit 1. An
 *         alarm ends the program with "FAIL timed out ... in phase: <phase>" after TIMEOUT_S seconds, so
 *         it never hangs; the test sends SIGALRM itself when it gives up, to learn the phase.
 *
 * The protocol, per direction (dir 0 = c-exposes: this program owns the memory and ucxx-ts initiates;
 * dir 1 = ts-exposes: ucxx-ts owns the memory and this program initiates):
 *  1. The owner creates two regions of REGION_SIZE (8 MiB) bytes: region 0 allocated by UCX (ucp_mem_map
 *     with UCP_MEM_MAP_ALLOCATE; a MemoryHandle without a buffer), region 1 allocated by the program and
 *     registered (malloc + ucp_mem_map here; a Node Buffer there). It fills byte i of region r with
 *     pattern_byte(i, INIT_SEED(dir, r)), then writes the atomic words (ATOMIC_OFFSET, below).
 *  2. The owner sends each region's serialized key by tag KEY_TAG(dir, r) = 0x4b45590000000000 |
 *     dir << 8 | r.
 *  3. The initiator, for each region: gets every OPS[k] range and checks the initial pattern; puts
 *     OPS[k].size bytes of pattern_byte(j, PUT_SEED(dir, r, k)) at OPS[k].offset (all posted, then one
 *     flush); gets every range again and checks the put pattern; runs the atomics below one at a time
 *     and checks every fetched value; flushes. Then it sends "DONE" by tag DONE_TAG(dir).
 *  4. The owner checks both regions byte for byte (initial pattern, final atomic words, put data) and
 *     sends its verdict by tag VERDICT_TAG(dir): "OK" or "FAIL <first difference>". This program prints
 *     "OK c-exposes ..." / "OK ts-exposes ..." lines as each direction passes.
 *
 * After the directions, this program sends "BYE" by tag BYE_TAG and closes its endpoint; ucxx-ts closes
 * its own once it has BYE. (Whoever closes first must expect nothing more: a message sent just before a
 * close can be overtaken by the disconnect, since shared memory and the connection manager are separate
 * channels; this program treats an endpoint error after BYE as the end of the exchange.)
 *
 * The pattern (identical in test/helpers/rma-protocol.ts):
 *     pattern_byte(i, s) = (uint8_t)((i * 131 + s * 7 + (i >> 8)) ^ (i >> 16))
 * INIT_SEED(dir, r) = 100 * dir + 1 + r; PUT_SEED(dir, r, k) = 100 * dir + 10 + 8 * r + k.
 *
 * Atomic words (little endian) at ATOMIC_OFFSET = 2 MiB, as the owner writes them, and the initiator's
 * operations in order, each with the value it must fetch:
 *     +0  u64 10                   fetch-add 5 -> 10; cswap 15 -> 0x8000000000000064 (fetches 15);
 *                                  cswap 1 -> 2 (fails, fetches 0x8000000000000064)
 *     +8  u32 7                    fetch-add 3 -> 7; cswap 10 -> 42 (fetches 10); cswap 0 -> 1 (fails, 42)
 *     +16 u64 0x0000000fffffffff   fetch-add 1 -> 0x0000000fffffffff (carry into the high half)
 *     +24 u32 0xffffffff           fetch-add 2 -> 0xffffffff (wraps to 1 within 32 bits)
 *     +28 u32 0x5a5a5a5a           untouched: a 32-bit operation that wrote 64 bits would show here
 * Final words: 0x8000000000000064, 42, 0x0000001000000000, 1, 0x5a5a5a5a. Bytes 12..15 keep the pattern.
 */
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 60
#define STR(x) STR_(x)
#define STR_(x) #x

#define KiB (1024ul)
#define MiB (1024ul * KiB)
#define REGION_SIZE (8 * MiB)
#define ATOMIC_OFFSET (2 * MiB)
#define NUM_REGIONS 2

#define KEY_TAG(dir, r) (0x4b45590000000000ull | ((uint64_t)(dir) << 8) | (uint64_t)(r))
#define DONE_TAG(dir) (0x444f4e4500000000ull | ((uint64_t)(dir) << 8))
#define VERDICT_TAG(dir) (0x5645524400000000ull | ((uint64_t)(dir) << 8))
#define BYE_TAG 0x4259450000000000ull
#define INIT_SEED(dir, r) (100u * (unsigned)(dir) + 1u + (unsigned)(r))
#define PUT_SEED(dir, r, k) (100u * (unsigned)(dir) + 10u + 8u * (unsigned)(r) + (unsigned)(k))

typedef struct {
    size_t offset;
    size_t size;
} op_range_t;

/* 8 B .. 4 MiB, aligned and not, none overlapping each other or the atomic words; the last ends at the
 * region's end. */
static const op_range_t OPS[] = {
    {0, 8},
    {4093, 13},
    {8193, 4101},
    {64 * KiB, 64 * KiB},
    {256 * KiB + 7, 1 * MiB},
    {4 * MiB, 4 * MiB},
};
#define NUM_OPS ((int)(sizeof(OPS) / sizeof(OPS[0])))

static const char *const REGION_NAME[NUM_REGIONS] = {"UCX-allocated", "malloc-registered"};

typedef struct {
    volatile int done;
    ucs_status_t status;
    size_t length;
} op_t;

static ucp_context_h context;
static ucp_worker_h worker;
static ucp_listener_h listener;
static ucp_ep_h ep;
static volatile ucp_conn_request_h conn_request;
static volatile int finished;
static const char *volatile phase = "start";
static ucp_err_handling_mode_t err_mode;
static int err_mode_any; /* a server's accepted endpoint takes the client's mode */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    printf("FAIL ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" (phase: %s)\n", phase);
    fflush(stdout);
    _exit(1);
}

static void on_alarm(int sig)
{
    static const char head[] = "FAIL timed out (SIGALRM: " STR(TIMEOUT_S) " s passed, or the test gave up) in phase: ";
    (void)sig;
    if (write(STDOUT_FILENO, head, sizeof(head) - 1) < 0) _exit(1);
    if (write(STDOUT_FILENO, phase, strlen(phase)) < 0) _exit(1);
    if (write(STDOUT_FILENO, "\n", 1) < 0) _exit(1);
    _exit(1);
}

static inline uint8_t pattern_byte(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131 + (size_t)seed * 7 + (i >> 8)) ^ (i >> 16));
}

/* ---- ucxx's serialized remote key ---------------------------------------------------------------- */

/* libstdc++'s _Hash_bytes (std::hash<std::string>), 64-bit: a MurmurHash64A variant. */
static uint64_t shift_mix(uint64_t v)
{
    return v ^ (v >> 47);
}

static uint64_t std_hash(const uint8_t *data, size_t len)
{
    const uint64_t m = 0xc6a4a7935bd1e995ull;
    uint64_t h = 0xc70f6907ull ^ ((uint64_t)len * m);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = 0;
        for (int b = 0; b < 8; b++) w |= (uint64_t)data[i + b] << (8 * b);
        h ^= shift_mix(w * m) * m;
        h *= m;
    }
    if (i < len) {
        uint64_t t = 0;
        for (size_t b = 0; i + b < len; b++) t |= (uint64_t)data[i + b] << (8 * b);
        h ^= t;
        h *= m;
    }
    return shift_mix(shift_mix(h) * m);
}

static void check_hash_vectors(void)
{
    static const struct { const char *text; uint64_t hash; } vectors[] = {
        {"", 0x553e93901e462a6eull},
        {"a", 0x454ddee488c1ed6bull},
        {"abcdefgh", 0x783db3e38db898bbull},
        {"abcdefghi", 0xb4ec9257851c8aafull},
    };
    for (size_t v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++) {
        uint64_t h = std_hash((const uint8_t *)vectors[v].text, strlen(vectors[v].text));
        if (h != vectors[v].hash) {
            fail("std_hash(\"%s\") = 0x%016" PRIx64 ", expected 0x%016" PRIx64, vectors[v].text, h, vectors[v].hash);
        }
    }
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int b = 0; b < 8; b++) p[b] = (uint8_t)(v >> (8 * b));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) v |= (uint64_t)p[b] << (8 * b);
    return v;
}

/* [checksum][N][packed rkey (N)][base][size], checksum = std_hash of [8, end). Caller frees. */
static uint8_t *serialize_key(const void *packed, size_t n, uint64_t base, uint64_t size, size_t *length)
{
    size_t total = 32 + n;
    uint8_t *out = malloc(total);
    if (out == NULL) fail("out of memory");
    put_u64(out + 8, n);
    memcpy(out + 16, packed, n);
    put_u64(out + 16 + n, base);
    put_u64(out + 24 + n, size);
    put_u64(out, std_hash(out + 8, total - 8));
    *length = total;
    return out;
}

typedef struct {
    const uint8_t *packed;
    size_t n;
    uint64_t base;
    uint64_t size;
    size_t trailing; /* bytes after the ucxx fields (ucxx ignores them; they are inside the checksum) */
} parsed_key_t;

/* Parses as ucxx's deserialize() does, and refuses what it should refuse but does not check. */
static parsed_key_t parse_key(const uint8_t *bytes, size_t length, const char *what)
{
    parsed_key_t key;
    if (length < 32) fail("%s: %zu bytes, shorter than the 32 bytes of fixed fields", what, length);
    uint64_t stored = get_u64(bytes);
    uint64_t computed = std_hash(bytes + 8, length - 8);
    if (stored != computed) {
        fail("%s: checksum 0x%016" PRIx64 ", but bytes [8, %zu) hash to 0x%016" PRIx64, what, stored, length, computed);
    }
    uint64_t n = get_u64(bytes + 8);
    if (n == 0 || n > length - 32) fail("%s: packed rkey length %" PRIu64 " in a %zu-byte key", what, n, length);
    key.packed = bytes + 16;
    key.n = (size_t)n;
    key.base = get_u64(bytes + 16 + n);
    key.size = get_u64(bytes + 24 + n);
    key.trailing = length - 32 - (size_t)n;
    return key;
}

/* ---- request completion -------------------------------------------------------------------------- */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    op->done = 1;
}

static void tag_recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info, void *user_data)
{
    op_t *op = user_data;
    (void)request;
    op->status = status;
    if (status == UCS_OK) op->length = info->length;
    op->done = 1;
}

static void *track(ucs_status_ptr_t request, op_t *op, const char *what)
{
    if (request == NULL) {
        op->status = UCS_OK;
        op->done = 1;
        return NULL;
    }
    if (UCS_PTR_IS_ERR(request)) fail("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(request)));
    return request;
}

static void wait_op(void *request, op_t *op, const char *what)
{
    while (!op->done) ucp_worker_progress(worker);
    if (request != NULL) ucp_request_free(request);
    if (op->status != UCS_OK) fail("%s completed with %s", what, ucs_status_string(op->status));
}

static void send_param(ucp_request_param_t *param, op_t *op)
{
    memset(param, 0, sizeof(*param));
    memset(op, 0, sizeof(*op));
    param->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param->cb.send = send_cb;
    param->user_data = op;
}

static void tag_send(const void *data, size_t length, uint64_t tag, const char *what)
{
    op_t op;
    ucp_request_param_t param;
    send_param(&param, &op);
    void *request = track(ucp_tag_send_nbx(ep, data, length, tag, &param), &op, what);
    wait_op(request, &op, what);
}

/* Receives one message of exactly `tag`; returns its length. */
static size_t tag_recv(void *buffer, size_t capacity, uint64_t tag, const char *what)
{
    op_t op;
    memset(&op, 0, sizeof(op));
    ucp_request_param_t param;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = tag_recv_cb;
    param.user_data = &op;
    void *request = track(ucp_tag_recv_nbx(worker, buffer, capacity, tag, UINT64_MAX, &param), &op, what);
    wait_op(request, &op, what);
    return op.length;
}

static void flush_ep(const char *what)
{
    op_t op;
    ucp_request_param_t param;
    send_param(&param, &op);
    void *request = track(ucp_ep_flush_nbx(ep, &param), &op, what);
    wait_op(request, &op, what);
}

/* ---- the owner's side ---------------------------------------------------------------------------- */

typedef struct {
    uint8_t *base;
    ucp_mem_h memh;
    void *malloced;
} region_t;

static void fill_region(uint8_t *base, unsigned seed)
{
    for (size_t i = 0; i < REGION_SIZE; i++) base[i] = pattern_byte(i, seed);
}

static void write_initial_words(uint8_t *base)
{
    uint8_t *w = base + ATOMIC_OFFSET;
    uint64_t a = 10, c = 0x0000000fffffffffull;
    uint32_t b = 7, d = 0xffffffffu, e = 0x5a5a5a5au;
    memcpy(w + 0, &a, 8);
    memcpy(w + 8, &b, 4);
    memcpy(w + 16, &c, 8);
    memcpy(w + 24, &d, 4);
    memcpy(w + 28, &e, 4);
}

/* The region as the initiator must leave it. */
static void expected_region(uint8_t *out, int dir, int r)
{
    fill_region(out, INIT_SEED(dir, r));
    uint8_t *w = out + ATOMIC_OFFSET;
    uint64_t a = 0x8000000000000064ull, c = 0x0000001000000000ull;
    uint32_t b = 42, d = 1, e = 0x5a5a5a5au;
    memcpy(w + 0, &a, 8);
    memcpy(w + 8, &b, 4);
    memcpy(w + 16, &c, 8);
    memcpy(w + 24, &d, 4);
    memcpy(w + 28, &e, 4);
    for (int k = 0; k < NUM_OPS; k++) {
        for (size_t j = 0; j < OPS[k].size; j++) out[OPS[k].offset + j] = pattern_byte(j, PUT_SEED(dir, r, k));
    }
}

static void map_region(region_t *region, int r)
{
    ucp_mem_map_params_t params;
    memset(&params, 0, sizeof(params));
    memset(region, 0, sizeof(*region));
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.length = REGION_SIZE;
    if (r == 0) {
        params.field_mask |= UCP_MEM_MAP_PARAM_FIELD_FLAGS;
        params.address = NULL;
        params.flags = UCP_MEM_MAP_ALLOCATE;
    } else {
        region->malloced = malloc(REGION_SIZE);
        if (region->malloced == NULL) fail("out of memory");
        params.address = region->malloced;
    }
    ucs_status_t status = ucp_mem_map(context, &params, &region->memh);
    if (status != UCS_OK) fail("ucp_mem_map (%s): %s", REGION_NAME[r], ucs_status_string(status));
    ucp_mem_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    status = ucp_mem_query(region->memh, &attr);
    if (status != UCS_OK) fail("ucp_mem_query: %s", ucs_status_string(status));
    if (attr.length < REGION_SIZE) fail("ucp_mem_query: %zu bytes mapped, asked for %lu", attr.length, REGION_SIZE);
    region->base = attr.address;
    if (r == 1 && region->base != region->malloced) fail("ucp_mem_query: the registered region moved");
}

static void unmap_region(region_t *region)
{
    ucs_status_t status = ucp_mem_unmap(context, region->memh);
    if (status != UCS_OK) fail("ucp_mem_unmap: %s", ucs_status_string(status));
    free(region->malloced);
}

static region_t regions[NUM_REGIONS];
static int regions_mapped;

static void run_owner(int dir)
{
    regions_mapped = 1;
    phase = "c-exposes: map and fill the regions";
    for (int r = 0; r < NUM_REGIONS; r++) {
        map_region(&regions[r], r);
        fill_region(regions[r].base, INIT_SEED(dir, r));
        write_initial_words(regions[r].base);
    }

    phase = "c-exposes: send the serialized keys";
    size_t key_lengths[NUM_REGIONS];
    for (int r = 0; r < NUM_REGIONS; r++) {
        void *packed;
        size_t n;
        ucs_status_t status = ucp_rkey_pack(context, regions[r].memh, &packed, &n);
        if (status != UCS_OK) fail("ucp_rkey_pack: %s", ucs_status_string(status));
        size_t length;
        uint8_t *serialized = serialize_key(packed, n, (uint64_t)(uintptr_t)regions[r].base, REGION_SIZE, &length);
        ucp_rkey_buffer_release(packed);
        /* Our own parser must take our own key back. */
        parsed_key_t check = parse_key(serialized, length, "our own key");
        if (check.n != n || check.base != (uint64_t)(uintptr_t)regions[r].base || check.size != REGION_SIZE) {
            fail("our own key does not parse back");
        }
        tag_send(serialized, length, KEY_TAG(dir, r), "send of a serialized key");
        key_lengths[r] = length;
        free(serialized);
    }

    phase = "c-exposes: wait for ucxx-ts to finish its RMA and atomics (DONE)";
    char done[16];
    size_t length = tag_recv(done, sizeof(done), DONE_TAG(dir), "receive of DONE");
    if (length != 4 || memcmp(done, "DONE", 4) != 0) fail("bad DONE message (%zu bytes)", length);

    phase = "c-exposes: check the regions";
    char verdict[256] = "OK";
    uint8_t *expected = malloc(REGION_SIZE);
    if (expected == NULL) fail("out of memory");
    for (int r = 0; r < NUM_REGIONS && verdict[0] == 'O'; r++) {
        expected_region(expected, dir, r);
        for (size_t i = 0; i < REGION_SIZE; i++) {
            if (regions[r].base[i] != expected[i]) {
                snprintf(verdict, sizeof(verdict), "FAIL %s region: byte %zu is 0x%02x, expected 0x%02x",
                         REGION_NAME[r], i, regions[r].base[i], expected[i]);
                break;
            }
        }
    }
    free(expected);
    tag_send(verdict, strlen(verdict), VERDICT_TAG(dir), "send of the verdict");
    if (verdict[0] != 'O') fail("%s", verdict + 5);
    printf("OK c-exposes: both regions (%lu bytes each) as expected after %d puts, %d gets and 8 atomics each; "
           "keys of %zu and %zu bytes\n", REGION_SIZE, NUM_OPS, 2 * NUM_OPS, key_lengths[0], key_lengths[1]);

    /* Unmapped after the endpoint is closed (teardown order: rkeys, endpoints, memory). */
}

/* ---- the initiator's side ------------------------------------------------------------------------ */

static void rma(int put, void *buffer, size_t length, uint64_t address, ucp_rkey_h rkey, const char *what)
{
    op_t op;
    ucp_request_param_t param;
    send_param(&param, &op);
    ucs_status_ptr_t request = put ? ucp_put_nbx(ep, buffer, length, address, rkey, &param)
                                   : ucp_get_nbx(ep, buffer, length, address, rkey, &param);
    wait_op(track(request, &op, what), &op, what);
}

/* One atomic with a fetched result; for cswap `operand` is the value compared with, `swap` the one stored. */
static uint64_t atomic_fetch(ucp_atomic_op_t opcode, int width, uint64_t operand, uint64_t swap, uint64_t address,
                             ucp_rkey_h rkey, const char *what)
{
    op_t op;
    ucp_request_param_t param;
    send_param(&param, &op);
    uint64_t operand64 = operand, reply64 = swap;
    uint32_t operand32 = (uint32_t)operand, reply32 = (uint32_t)swap;
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    param.datatype = ucp_dt_make_contig(width / 8);
    param.reply_buffer = width == 64 ? (void *)&reply64 : (void *)&reply32;
    const void *buffer = width == 64 ? (const void *)&operand64 : (const void *)&operand32;
    ucs_status_ptr_t request = ucp_atomic_op_nbx(ep, opcode, buffer, 1, address, rkey, &param);
    wait_op(track(request, &op, what), &op, what);
    return width == 64 ? reply64 : reply32;
}

static void check_range(const uint8_t *buffer, size_t length, unsigned seed, const char *what, int r, int k)
{
    for (size_t j = 0; j < length; j++) {
        uint8_t expected = pattern_byte(j, seed);
        if (buffer[j] != expected) {
            fail("%s, %s region, range %d (%zu bytes at %zu): byte %zu is 0x%02x, expected 0x%02x", what,
                 REGION_NAME[r], k, OPS[k].size, OPS[k].offset, j, buffer[j], expected);
        }
    }
}

static void check_initial_range(const uint8_t *buffer, int dir, int r, int k)
{
    /* The initial pattern is indexed by the byte's place in the region. */
    for (size_t j = 0; j < OPS[k].size; j++) {
        uint8_t expected = pattern_byte(OPS[k].offset + j, INIT_SEED(dir, r));
        if (buffer[j] != expected) {
            fail("get before the puts, %s region, range %d (%zu bytes at %zu): byte %zu is 0x%02x, expected 0x%02x",
                 REGION_NAME[r], k, OPS[k].size, OPS[k].offset, j, buffer[j], expected);
        }
    }
}

static void run_initiator(int dir)
{
    phase = "ts-exposes: receive and parse ucxx-ts's serialized keys";
    ucp_rkey_h rkeys[NUM_REGIONS];
    uint64_t bases[NUM_REGIONS];
    size_t trailing = 0;
    for (int r = 0; r < NUM_REGIONS; r++) {
        uint8_t bytes[4096];
        size_t length = tag_recv(bytes, sizeof(bytes), KEY_TAG(dir, r), "receive of a serialized key");
        parsed_key_t key = parse_key(bytes, length, REGION_NAME[r]);
        if (key.size != REGION_SIZE) fail("%s key: region size %" PRIu64 ", expected %lu", REGION_NAME[r], key.size, REGION_SIZE);
        if (key.base == 0) fail("%s key: base address 0", REGION_NAME[r]);
        ucs_status_t status = ucp_ep_rkey_unpack(ep, key.packed, &rkeys[r]);
        if (status != UCS_OK) fail("ucp_ep_rkey_unpack (%s key): %s", REGION_NAME[r], ucs_status_string(status));
        bases[r] = key.base;
        trailing = key.trailing;
    }

    uint8_t *buffers[NUM_OPS];
    for (int k = 0; k < NUM_OPS; k++) {
        buffers[k] = malloc(OPS[k].size);
        if (buffers[k] == NULL) fail("out of memory");
    }
    for (int r = 0; r < NUM_REGIONS; r++) {
        phase = "ts-exposes: get the initial bytes";
        for (int k = 0; k < NUM_OPS; k++) {
            memset(buffers[k], 0xee, OPS[k].size);
            rma(0, buffers[k], OPS[k].size, bases[r] + OPS[k].offset, rkeys[r], "get");
            check_initial_range(buffers[k], dir, r, k);
        }

        phase = "ts-exposes: put, then flush";
        op_t ops[NUM_OPS];
        void *requests[NUM_OPS];
        for (int k = 0; k < NUM_OPS; k++) {
            for (size_t j = 0; j < OPS[k].size; j++) buffers[k][j] = pattern_byte(j, PUT_SEED(dir, r, k));
            ucp_request_param_t param;
            send_param(&param, &ops[k]);
            requests[k] = track(ucp_put_nbx(ep, buffers[k], OPS[k].size, bases[r] + OPS[k].offset, rkeys[r], &param),
                                &ops[k], "put");
        }
        for (int k = 0; k < NUM_OPS; k++) wait_op(requests[k], &ops[k], "put");
        flush_ep("flush after the puts");

        phase = "ts-exposes: get what was put";
        for (int k = 0; k < NUM_OPS; k++) {
            memset(buffers[k], 0xee, OPS[k].size);
            rma(0, buffers[k], OPS[k].size, bases[r] + OPS[k].offset, rkeys[r], "get");
            check_range(buffers[k], OPS[k].size, PUT_SEED(dir, r, k), "get after the puts", r, k);
        }

        phase = "ts-exposes: atomics";
        uint64_t w = bases[r] + ATOMIC_OFFSET;
        struct {
            ucp_atomic_op_t op;
            int width;
            uint64_t offset, operand, swap, fetched;
        } const steps[] = {
            {UCP_ATOMIC_OP_ADD, 64, 0, 5, 0, 10},
            {UCP_ATOMIC_OP_CSWAP, 64, 0, 15, 0x8000000000000064ull, 15},
            {UCP_ATOMIC_OP_CSWAP, 64, 0, 1, 2, 0x8000000000000064ull},
            {UCP_ATOMIC_OP_ADD, 32, 8, 3, 0, 7},
            {UCP_ATOMIC_OP_CSWAP, 32, 8, 10, 42, 10},
            {UCP_ATOMIC_OP_CSWAP, 32, 8, 0, 1, 42},
            {UCP_ATOMIC_OP_ADD, 64, 16, 1, 0, 0x0000000fffffffffull},
            {UCP_ATOMIC_OP_ADD, 32, 24, 2, 0, 0xffffffffull},
        };
        for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
            uint64_t got = atomic_fetch(steps[s].op, steps[s].width, steps[s].operand, steps[s].swap,
                                        w + steps[s].offset, rkeys[r], "atomic");
            if (got != steps[s].fetched) {
                fail("%s region: atomic %zu (%s%d at +%" PRIu64 ") fetched 0x%" PRIx64 ", expected 0x%" PRIx64,
                     REGION_NAME[r], s, steps[s].op == UCP_ATOMIC_OP_ADD ? "fetch-add" : "cswap", steps[s].width,
                     steps[s].offset, got, steps[s].fetched);
            }
        }
        flush_ep("flush after the atomics");
    }
    for (int k = 0; k < NUM_OPS; k++) free(buffers[k]);

    phase = "ts-exposes: send DONE, wait for ucxx-ts's verdict";
    tag_send("DONE", 4, DONE_TAG(dir), "send of DONE");
    char verdict[512];
    size_t length = tag_recv(verdict, sizeof(verdict) - 1, VERDICT_TAG(dir), "receive of the verdict");
    verdict[length] = '\0';
    if (strcmp(verdict, "OK") != 0) fail("ucxx-ts says: %s", verdict);
    for (int r = 0; r < NUM_REGIONS; r++) ucp_rkey_destroy(rkeys[r]);
    printf("OK ts-exposes: ucxx-ts's keys parsed (checksum verified, %zu trailing bytes ignored as ucxx does), "
           "unpacked; %d gets checked, %d puts and 8 atomics checked by ucxx-ts, per region\n",
           trailing, 2 * NUM_OPS, NUM_OPS);
}

/* ---- connection ---------------------------------------------------------------------------------- */

static void on_ep_error(void *arg, ucp_ep_h failed, ucs_status_t status)
{
    (void)arg;
    (void)failed;
    /* After the last verdict the peer may close first: that is the end of the exchange. */
    if (!finished) fail("endpoint error: %s", ucs_status_string(status));
}

static void on_conn_request(ucp_conn_request_h request, void *arg)
{
    (void)arg;
    if (conn_request != NULL) {
        ucp_listener_reject(listener, request);
        return;
    }
    conn_request = request;
}

static void set_error_handling(ucp_ep_params_t *params)
{
    params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params->err_handler.cb = on_ep_error;
    params->err_handler.arg = NULL;
    if (!err_mode_any) {
        params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
        params->err_mode = err_mode;
    }
}

static struct sockaddr_in ipv4(const char *host, long port)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) fail("bad IPv4 address '%s'", host);
    return addr;
}

static void serve(const char *host)
{
    struct sockaddr_in addr = ipv4(host, 0);
    ucp_listener_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = (const struct sockaddr *)&addr;
    params.sockaddr.addrlen = sizeof(addr);
    params.conn_handler.cb = on_conn_request;
    params.conn_handler.arg = NULL;
    ucs_status_t status = ucp_listener_create(worker, &params, &listener);
    if (status != UCS_OK) fail("ucp_listener_create: %s", ucs_status_string(status));

    ucp_listener_attr_t attr;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    status = ucp_listener_query(listener, &attr);
    if (status != UCS_OK) fail("ucp_listener_query: %s", ucs_status_string(status));
    printf("PORT %d\n", ntohs(((struct sockaddr_in *)&attr.sockaddr)->sin_port));
    fflush(stdout);

    phase = "accept";
    while (conn_request == NULL) ucp_worker_progress(worker);
    ucp_ep_params_t ep_params;
    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep_params.conn_request = conn_request;
    set_error_handling(&ep_params);
    status = ucp_ep_create(worker, &ep_params, &ep);
    if (status != UCS_OK) fail("ucp_ep_create (connection request): %s", ucs_status_string(status));
}

static void connect_to(const char *host, const char *port_text)
{
    char *end;
    long port = strtol(port_text, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) fail("bad port '%s'", port_text);
    struct sockaddr_in addr = ipv4(host, port);
    ucp_ep_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_FLAGS;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = (const struct sockaddr *)&addr;
    params.sockaddr.addrlen = sizeof(addr);
    set_error_handling(&params);
    phase = "connect";
    ucs_status_t status = ucp_ep_create(worker, &params, &ep);
    if (status != UCS_OK) fail("ucp_ep_create (%s:%ld): %s", host, port, ucs_status_string(status));
    /* The connection exists once a flush completes. */
    flush_ep("flush of the new endpoint");
}

/* ---- main ---------------------------------------------------------------------------------------- */

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
    fprintf(stderr, "usage: rma_peer server ADDR ERRMODE DIRECTION | rma_peer client ADDR PORT ERRMODE DIRECTION\n"
                    "       ERRMODE: none | peer (| any, server only); DIRECTION: c-exposes | ts-exposes | both\n");
    printf("FAIL bad command line\n");
    exit(1);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(TIMEOUT_S);
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_hash_vectors();

    if (argc < 2) usage();
    int server = strcmp(argv[1], "server") == 0;
    if (!server && strcmp(argv[1], "client") != 0) usage();
    if (argc != (server ? 5 : 6)) usage();
    const char *mode = argv[server ? 3 : 4];
    const char *direction = argv[server ? 4 : 5];
    if (strcmp(mode, "none") == 0) err_mode = UCP_ERR_HANDLING_MODE_NONE;
    else if (strcmp(mode, "peer") == 0) err_mode = UCP_ERR_HANDLING_MODE_PEER;
    else if (server && strcmp(mode, "any") == 0) err_mode_any = 1;
    else usage();
    int c_exposes = strcmp(direction, "c-exposes") == 0 || strcmp(direction, "both") == 0;
    int ts_exposes = strcmp(direction, "ts-exposes") == 0 || strcmp(direction, "both") == 0;
    if (!c_exposes && !ts_exposes) usage();

    phase = "init";
    ucp_config_t *config;
    ucs_status_t status = ucp_config_read(NULL, NULL, &config);
    if (status != UCS_OK) fail("ucp_config_read: %s", ucs_status_string(status));
    ucp_params_t params;
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64;
    status = ucp_init_version(1, 13, &params, config, &context);
    ucp_config_release(config);
    if (status != UCS_OK) fail("ucp_init: %s", ucs_status_string(status));

    ucp_worker_params_t worker_params;
    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    status = ucp_worker_create(context, &worker_params, &worker);
    if (status != UCS_OK) fail("ucp_worker_create: %s", ucs_status_string(status));

    if (server) serve(argv[2]);
    else connect_to(argv[2], argv[3]);

    if (c_exposes) run_owner(0);
    if (ts_exposes) run_initiator(1);

    /* The last message is ours: ucxx-ts closes once it has it. A message sent just before a close could
     * be overtaken by the disconnect (shared memory and the connection manager are separate channels),
     * so whoever closes first must have nothing left to receive. */
    phase = "send BYE";
    tag_send("BYE", 3, BYE_TAG, "send of BYE");
    finished = 1;

    /* Graceful close (flushes); bounded, since the peer may already be closing its side. */
    phase = "close";
    ucp_request_param_t close_param;
    memset(&close_param, 0, sizeof(close_param));
    void *close_request = ucp_ep_close_nbx(ep, &close_param);
    if (close_request != NULL && !UCS_PTR_IS_ERR(close_request)) {
        time_t deadline = time(NULL) + 3;
        while (ucp_request_check_status(close_request) == UCS_INPROGRESS && time(NULL) < deadline) {
            ucp_worker_progress(worker);
        }
        if (ucp_request_check_status(close_request) != UCS_INPROGRESS) ucp_request_free(close_request);
    }
    if (listener != NULL) ucp_listener_destroy(listener);
    if (regions_mapped) {
        for (int r = 0; r < NUM_REGIONS; r++) unmap_region(&regions[r]);
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    printf("OK\n");
    fflush(stdout);
    return 0;
}
