/*
 * ucxx_real_peer: a peer written with real libucxx's public C++ API (the libucxx-cu12 wheel's headers
 * and library, ucxx 0.52), the way a ucxx user writes one: builders for context, worker, listener,
 * endpoints, memory handles, remote keys and requests; endpoints with error handling on (ucxx's
 * default, set explicitly here). Driven by test/ucxx-real.test.ts, in both roles.
 *
 * Usage:  ucxx_real_peer server SCENARIO ARG...             listen on port 0, print "PORT <n>"
 *         ucxx_real_peer client HOST PORT SCENARIO ARG...   connect to HOST:PORT
 * Result: "OK" on stdout and exit 0, or one "FAIL <what>" line and exit 1; SIGALRM (sent by the test
 * when it gives up) prints "FAIL timed out in phase: <phase>". A connection request the listener
 * cannot accept prints "ACCEPT FAILED <what>" and the listener waits for the next one.
 *
 * Pattern (as test/helpers/pattern.ts cPattern): byte i with seed s is (uint8_t)((i*131 + s*7 + (i>>8)) ^ (i>>16)).
 *
 * Scenarios (the last step of each but `sink`/`source`: ucxx-ts sends the 4 bytes "DONE" with tag
 * TAG_ACK, this program closes its endpoint and prints OK):
 *   ping               receives 8 bytes (seed 1) with TAG_TS_TO_C, sends them back with TAG_C_TO_TS.
 *   rkey SIZE          a SIZE-byte UCX-allocated MemoryHandle filled with seed 10; its serialized remote
 *                      key goes to ucxx-ts with TAG_KEY_C (an 8-byte length, then the key); ucxx-ts's
 *                      key comes the same way with TAG_KEY_TS and is rebuilt here. This program puts
 *                      RMA_LEN bytes of seed 20 at PUT_OFF of ucxx-ts's region, flushes, gets RMA_LEN
 *                      bytes from GET_OFF (ucxx-ts filled its region with seed 30) and checks them,
 *                      then sends "CPUT" with TAG_C_TO_TS. After DONE it checks its own region: seed
 *                      40 at TS_PUT_OFF (RMA_LEN bytes, written by ucxx-ts), seed 10 everywhere else.
 *   tagmulti FRAME...  receives a tagMulti message with TAG_TS_TO_C (frame i: seed 1000 + i), checks
 *                      count, sizes and bytes; sends the same sizes (seed 2000 + i) with TAG_C_TO_TS.
 *                      FRAME is a size, or COUNTxSIZE.
 *   am SIZE...         message k = 0..N-1 from ucxx-ts: data SIZE[k] bytes of seed 3000 + k, a user
 *                      header of 8 + k bytes of seed 3500 + k when k is odd, receiver-callback info
 *                      {owner "ucxx-ts-test", id 0x1000 + k} when k % 3 == 1 (registered here before
 *                      connecting; the others are taken with amRecv in order). Then this program sends
 *                      the same set with seeds 4000 + k and 4500 + k.
 *   echo SIZE          (server; ucxx's basic.cpp shape) receives SIZE bytes (seed 5) with TAG_TS_TO_C,
 *                      sends them back with TAG_C_TO_TS and a tagMulti of [SIZE bytes of seed 6, 100
 *                      bytes of seed 7] with TAG_MULTI_C, then closes at once (no DONE): ucxx-ts
 *                      receives after the close.
 *   sink SIZE          prints READY and keeps receiving SIZE-byte tag messages with TAG_TS_TO_C until
 *                      it is killed.
 *   source SIZE        a SIZE-byte region (seed 50) whose key goes out as in rkey; prints READY and
 *                      keeps sending SIZE-byte tag messages (seed 51) with TAG_C_TO_TS until killed.
 */
#include <ucxx/api.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr ucxx::Tag TAG_TS_TO_C{0x7563787800000001ULL};
constexpr ucxx::Tag TAG_C_TO_TS{0x7563787800000142ULL};
constexpr ucxx::Tag TAG_KEY_TS{0x7563787800000201ULL};
constexpr ucxx::Tag TAG_KEY_C{0x7563787800000202ULL};
constexpr ucxx::Tag TAG_ACK{0xacacacacacacacacULL};
constexpr ucxx::Tag TAG_MULTI_C{0x7563787800000301ULL};
constexpr size_t RMA_LEN    = 65536 + 3;
constexpr size_t PUT_OFF    = 4096;
constexpr size_t GET_OFF    = 300000;
constexpr size_t TS_PUT_OFF = 8192 + 1;
constexpr const char* OWNER = "ucxx-ts-test";
constexpr uint64_t CALLBACK_ID_BASE = 0x1000;

volatile const char* g_phase = "start";

void onAlarm(int)
{
  char line[256];
  int n = snprintf(line, sizeof line, "FAIL timed out in phase: %s\n", const_cast<const char*>(g_phase));
  if (n > 0) (void)!write(1, line, static_cast<size_t>(n));
  _exit(1);
}

[[noreturn]] void fail(const std::string& what)
{
  printf("FAIL %s\n", what.c_str());
  fflush(stdout);
  _exit(1);
}

uint8_t pat(size_t i, unsigned seed)
{
  return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) ^ (i >> 16));
}

void fill(void* p, size_t n, unsigned seed)
{
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

std::vector<uint8_t> pattern(size_t n, unsigned seed)
{
  std::vector<uint8_t> v(n);
  fill(v.data(), n, seed);
  return v;
}

void check(const void* p, size_t n, unsigned seed, const std::string& what)
{
  auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed))
      fail(what + ": byte " + std::to_string(i) + " of " + std::to_string(n) + " is " +
           std::to_string(b[i]) + ", expected " + std::to_string(pat(i, seed)));
}

std::vector<size_t> expandFrames(const std::vector<std::string>& spec)
{
  std::vector<size_t> out;
  for (const auto& s : spec) {
    auto x = s.find('x');
    if (x == std::string::npos) {
      out.push_back(std::stoull(s));
    } else {
      size_t count = std::stoull(s.substr(0, x)), size = std::stoull(s.substr(x + 1));
      for (size_t i = 0; i < count; i++) out.push_back(size);
    }
  }
  return out;
}

struct Peer {
  std::shared_ptr<ucxx::Context> context;
  std::shared_ptr<ucxx::Worker> worker;
  std::shared_ptr<ucxx::Listener> listener;
  std::shared_ptr<ucxx::Endpoint> endpoint;

  void progress() { worker->progressWorkerEvent(10); }

  void wait(const std::shared_ptr<ucxx::Request>& request, const char* phase)
  {
    g_phase = phase;
    while (!request->isCompleted()) progress();
    request->checkError();
  }

  void waitAll(const std::vector<std::shared_ptr<ucxx::Request>>& requests, const char* phase)
  {
    for (const auto& r : requests) wait(r, phase);
  }

  void send(const void* data, size_t length, ucxx::Tag tag, const char* phase)
  {
    std::shared_ptr<ucxx::Request> r = endpoint->tagSendBuilder(data, length, tag).build();
    wait(r, phase);
  }

  void recvExact(void* data, size_t length, ucxx::Tag tag, const char* phase)
  {
    std::shared_ptr<ucxx::Request> r =
      endpoint->tagRecvBuilder(data, length, tag, ucxx::TagMaskFull).build();
    wait(r, phase);
  }

  /** An 8-byte length, then that many bytes (how these tests pass a serialized remote key). */
  void sendSized(const std::string& bytes, ucxx::Tag tag, const char* phase)
  {
    uint64_t n = bytes.size();
    send(&n, sizeof n, tag, phase);
    send(bytes.data(), bytes.size(), tag, phase);
  }

  std::string recvSized(ucxx::Tag tag, const char* phase)
  {
    uint64_t n = 0;
    recvExact(&n, sizeof n, tag, phase);
    if (n == 0 || n > (1u << 20)) fail(std::string(phase) + ": length " + std::to_string(n));
    std::string bytes(n, '\0');
    recvExact(bytes.data(), n, tag, phase);
    return bytes;
  }

  void awaitDone()
  {
    char done[4];
    recvExact(done, sizeof done, TAG_ACK, "waiting for DONE");
    if (memcmp(done, "DONE", 4) != 0) fail("the acknowledgement is not DONE");
  }

  void close()
  {
    g_phase = "closing the endpoint";
    std::shared_ptr<ucxx::Request> r = endpoint->closeBuilder().build();
    while (!r->isCompleted()) progress();
  }
};

void listenerCallback(ucp_conn_request_h connRequest, void* arg)
{
  auto* peer = static_cast<Peer*>(arg);
  if (peer->endpoint != nullptr) {
    (void)ucp_listener_reject(peer->listener->getHandle(), connRequest);
    return;
  }
  try {
    peer->endpoint = peer->listener->endpointBuilder(connRequest).endpointErrorHandling(true).build();
  } catch (const std::exception& e) {
    printf("ACCEPT FAILED %s\n", e.what());
    fflush(stdout);
  }
}

// ---- scenarios ----------------------------------------------------------------------------------

void ping(Peer& p)
{
  uint8_t buf[8];
  p.recvExact(buf, sizeof buf, TAG_TS_TO_C, "ping: receive");
  check(buf, sizeof buf, 1, "ping");
  p.send(buf, sizeof buf, TAG_C_TO_TS, "ping: send back");
}

std::shared_ptr<ucxx::MemoryHandle> exposeRegion(Peer& p, size_t size, unsigned seed, const char* phase)
{
  std::shared_ptr<ucxx::MemoryHandle> region = p.context->memoryHandleBuilder(size).build();
  if (region->getSize() < size) fail("the memory handle is smaller than asked");
  fill(reinterpret_cast<void*>(region->getBaseAddress()), size, seed);
  std::shared_ptr<ucxx::RemoteKey> key = region->remoteKeyBuilder().build();
  p.sendSized(key->serialize(), TAG_KEY_C, phase);
  return region;
}

void rkey(Peer& p, size_t size)
{
  auto region = exposeRegion(p, size, 10, "rkey: sending this key");
  std::string theirs = p.recvSized(TAG_KEY_TS, "rkey: receiving ucxx-ts's key");
  std::shared_ptr<ucxx::RemoteKey> key = p.endpoint->remoteKeyBuilder(theirs).build();
  printf("TS KEY size %zu base 0x%llx\n", key->getSize(), static_cast<unsigned long long>(key->getBaseAddress()));
  if (key->getSize() < GET_OFF + RMA_LEN) fail("ucxx-ts's region is too small: " + std::to_string(key->getSize()));

  auto out = pattern(RMA_LEN, 20);
  std::shared_ptr<ucxx::Request> put =
    p.endpoint->memPutBuilder(out.data(), out.size(), key).remoteAddressOffset(PUT_OFF).build();
  p.wait(put, "rkey: memPut");
  std::shared_ptr<ucxx::Request> flush = p.endpoint->flushBuilder().build();
  p.wait(flush, "rkey: flush");
  std::vector<uint8_t> in(RMA_LEN);
  std::shared_ptr<ucxx::Request> get =
    p.endpoint->memGetBuilder(in.data(), in.size(), key).remoteAddressOffset(GET_OFF).build();
  p.wait(get, "rkey: memGet");
  check(in.data(), in.size(), 30, "rkey: memGet from ucxx-ts's region");
  p.send("CPUT", 4, TAG_C_TO_TS, "rkey: CPUT");

  p.awaitDone();
  auto* mine = reinterpret_cast<const uint8_t*>(region->getBaseAddress());
  check(mine + TS_PUT_OFF, RMA_LEN, 40, "rkey: what ucxx-ts put into this region");
  check(mine, TS_PUT_OFF, 10, "rkey: this region before ucxx-ts's put");
  auto rest = pattern(size, 10);
  if (memcmp(mine + TS_PUT_OFF + RMA_LEN, rest.data() + TS_PUT_OFF + RMA_LEN, size - TS_PUT_OFF - RMA_LEN) != 0)
    fail("rkey: this region after ucxx-ts's put changed");
  printf("RKEY OK\n");
}

void tagMulti(Peer& p, const std::vector<size_t>& sizes)
{
  std::shared_ptr<ucxx::RequestTagMulti> recv =
    p.endpoint->tagMultiRecvBuilder(TAG_TS_TO_C, ucxx::TagMaskFull).build();
  p.wait(recv, "tagmulti: receive");
  std::vector<std::shared_ptr<ucxx::Buffer>> frames;
  for (const auto& br : recv->_bufferRequests)
    if (br->buffer != nullptr) frames.push_back(br->buffer);
  if (frames.size() != sizes.size())
    fail("tagmulti: " + std::to_string(frames.size()) + " frames, expected " + std::to_string(sizes.size()));
  for (size_t i = 0; i < sizes.size(); i++) {
    if (frames[i]->getSize() != sizes[i])
      fail("tagmulti: frame " + std::to_string(i) + " has " + std::to_string(frames[i]->getSize()) + " bytes");
    check(frames[i]->data(), sizes[i], static_cast<unsigned>(1000 + i), "tagmulti: frame " + std::to_string(i));
  }
  printf("TAGMULTI RECEIVED %zu\n", frames.size());

  std::vector<std::vector<uint8_t>> out;
  std::vector<const void*> pointers;
  for (size_t i = 0; i < sizes.size(); i++) out.push_back(pattern(sizes[i], static_cast<unsigned>(2000 + i)));
  for (auto& f : out) pointers.push_back(f.data());
  std::vector<int> isCUDA(sizes.size(), 0);
  std::shared_ptr<ucxx::Request> send =
    p.endpoint->tagMultiSendBuilder(pointers, sizes, isCUDA, TAG_C_TO_TS).build();
  p.wait(send, "tagmulti: send");
}

size_t userHeaderLength(size_t k) { return k % 2 == 1 ? 8 + k : 0; }
bool hasCallback(size_t k) { return k % 3 == 1; }

void checkAm(const std::shared_ptr<ucxx::Request>& r, size_t k, size_t size)
{
  std::string what = "am: message " + std::to_string(k);
  r->checkError();
  std::shared_ptr<ucxx::Buffer> data = r->getRecvBuffer();
  size_t got = data == nullptr ? 0 : data->getSize();
  if (got != size) fail(what + ": " + std::to_string(got) + " bytes, expected " + std::to_string(size));
  if (size > 0) check(data->data(), size, static_cast<unsigned>(3000 + k), what + " data");
  std::string header = r->getRecvHeader();
  if (header.size() != userHeaderLength(k))
    fail(what + ": user header of " + std::to_string(header.size()) + " bytes, expected " + std::to_string(userHeaderLength(k)));
  check(header.data(), header.size(), static_cast<unsigned>(3500 + k), what + " user header");
}

struct Callbacks {
  std::map<size_t, std::pair<std::shared_ptr<ucxx::Request>, ucp_ep_h>> received;
};

void registerCallbacks(Peer& p, size_t n, Callbacks& callbacks)
{
  for (size_t k = 0; k < n; k++) {
    if (!hasCallback(k)) continue;
    p.worker->registerAmReceiverCallback(
      ucxx::AmReceiverCallbackInfo(OWNER, CALLBACK_ID_BASE + k),
      [&callbacks, k](std::shared_ptr<ucxx::Request> request, ucp_ep_h ep) { callbacks.received[k] = {request, ep}; });
  }
}

void am(Peer& p, const std::vector<size_t>& sizes, Callbacks& callbacks)
{
  size_t n = sizes.size(), expected = 0;
  for (size_t k = 0; k < n; k++) {
    if (hasCallback(k)) {
      expected++;
      continue;
    }
    std::shared_ptr<ucxx::Request> r = p.endpoint->amRecvBuilder().build();
    p.wait(r, "am: amRecv");
    checkAm(r, k, sizes[k]);
  }
  g_phase = "am: receiver callbacks";
  while (callbacks.received.size() < expected) p.progress();
  for (auto& [k, received] : callbacks.received) {
    if (received.second != p.endpoint->getHandle()) fail("am: a callback's endpoint is not the connection's");
    checkAm(received.first, k, sizes[k]);
  }
  printf("AM RECEIVED %zu\n", n);

  std::vector<std::vector<uint8_t>> data;
  std::vector<std::shared_ptr<ucxx::Request>> sends;
  for (size_t k = 0; k < n; k++) data.push_back(pattern(sizes[k], static_cast<unsigned>(4000 + k)));
  for (size_t k = 0; k < n; k++) {
    ucxx::AmSendParams params;
    auto header = pattern(userHeaderLength(k), static_cast<unsigned>(4500 + k));
    params.setUserHeader(header.data(), header.size());
    if (hasCallback(k)) params.receiverCallbackInfo = ucxx::AmReceiverCallbackInfo(OWNER, CALLBACK_ID_BASE + k);
    sends.push_back(p.endpoint->amSendBuilder(data[k].data(), data[k].size(), params).build());
  }
  p.waitAll(sends, "am: amSend");
}

void echo(Peer& p, size_t size)
{
  std::vector<uint8_t> buf(size);
  p.recvExact(buf.data(), size, TAG_TS_TO_C, "echo: receive");
  check(buf.data(), size, 5, "echo");
  std::shared_ptr<ucxx::Request> back = p.endpoint->tagSendBuilder(buf.data(), size, TAG_C_TO_TS).build();
  auto first = pattern(size, 6);
  auto second = pattern(100, 7);
  std::vector<const void*> pointers{first.data(), second.data()};
  std::vector<size_t> sizes{size, 100};
  std::vector<int> isCUDA(2, 0);
  std::shared_ptr<ucxx::Request> multi =
    p.endpoint->tagMultiSendBuilder(pointers, sizes, isCUDA, TAG_MULTI_C).build();
  p.waitAll({back, multi}, "echo: send back");
}

void sink(Peer& p, size_t size)
{
  std::vector<uint8_t> buf(size);
  printf("READY\n");
  fflush(stdout);
  for (;;) p.recvExact(buf.data(), size, TAG_TS_TO_C, "sink: receive");
}

void source(Peer& p, size_t size)
{
  auto region = exposeRegion(p, size, 50, "source: sending the key");
  auto out = pattern(size, 51);
  printf("READY\n");
  fflush(stdout);
  for (;;) p.send(out.data(), size, TAG_C_TO_TS, "source: send");
}

}  // namespace

int main(int argc, char** argv)
{
  setvbuf(stdout, nullptr, _IOLBF, 0);
  signal(SIGALRM, onAlarm);
  if (argc < 3) fail("usage: ucxx_real_peer server SCENARIO ARG... | client HOST PORT SCENARIO ARG...");
  std::string role = argv[1];
  int first        = role == "server" ? 2 : 4;
  if (role != "server" && (role != "client" || argc < 5)) fail("bad role or arguments");
  std::string scenario = argv[first];
  std::vector<std::string> args(argv + first + 1, argv + argc);

  Peer p;
  Callbacks callbacks;
  try {
    g_phase   = "creating the context";
    p.context = ucxx::contextBuilder(ucxx::Context::defaultFeatureFlags).build();
    p.worker  = p.context->workerBuilder().build();
    p.worker->initBlockingProgressMode();
    if (scenario == "am") registerCallbacks(p, args.size(), callbacks);
    if (role == "server") {
      p.listener = p.worker->listenerBuilder(0, listenerCallback, &p).build();
      printf("PORT %u\n", static_cast<unsigned>(p.listener->getPort()));
      g_phase = "waiting for a connection";
      while (p.endpoint == nullptr) p.progress();
    } else {
      g_phase    = "connecting";
      p.endpoint = p.worker->endpointBuilder(argv[2], static_cast<uint16_t>(atoi(argv[3])))
                     .endpointErrorHandling(true)
                     .build();
    }

    if (scenario == "ping") {
      ping(p);
    } else if (scenario == "rkey") {
      rkey(p, std::stoull(args.at(0)));
    } else if (scenario == "tagmulti") {
      tagMulti(p, expandFrames(args));
    } else if (scenario == "am") {
      std::vector<size_t> sizes;
      for (const auto& a : args) sizes.push_back(std::stoull(a));
      am(p, sizes, callbacks);
    } else if (scenario == "echo") {
      echo(p, std::stoull(args.at(0)));
    } else if (scenario == "sink") {
      sink(p, std::stoull(args.at(0)));
    } else if (scenario == "source") {
      source(p, std::stoull(args.at(0)));
    } else {
      fail("unknown scenario " + scenario);
    }
    if (scenario != "rkey" && scenario != "echo") p.awaitDone();
    p.close();
  } catch (const std::exception& e) {
    fail(std::string("in phase ") + const_cast<const char*>(g_phase) + ": " + e.what());
  }
  printf("OK\n");
  fflush(stdout);
  p.endpoint.reset();
  p.listener.reset();
  p.worker.reset();
  p.context.reset();
  return 0;
}
