/*
 * ucxx_bench: the ucxx C++ column of `npm run bench`. A two-process tag and stream benchmark written
 * with real libucxx's public API (the libucxx-cu12 wheel, ucxx 0.52: context, worker, listener and endpoint
 * builders, tagSend / tagRecv and streamSend / streamRecv requests, worker->progress() polling), the
 * way a ucxx user writes one, with the loops of ucxx's perftest and ucx_perftest:
 *   tag_lat  ping-pong: the client posts its receive and sends, the server receives and sends back;
 *            latency is half the round trip (p50, p99 over every iteration; mean over the whole loop).
 *   tag_bw   one-way stream from client to server with a sliding window of WINDOW outstanding sends
 *            (and WINDOW posted receives on the server), ended by an 8-byte ack from the server, so the
 *            client's time includes delivery; bandwidth is SIZE * ITERATIONS / time.
 *   stream_bw  the same with stream messages: WINDOW outstanding streamSends, the server receiving
 *            each message whole (ucxx's stream receive completes once its buffer is full), one at a time
 *            as ucx_perftest's stream_bw does; the ack is a tag message.
 * The bench builds it with g++ against .venv's wheels (bench/run.ts, the way test/helpers/ucxx-wheel.ts
 * builds the C++ test peers): it needs the wheel's UCX (1.20) at run time, found through its RPATH.
 *
 * Usage: ucxx_bench tag_lat|tag_bw|stream_bw SIZE ITERATIONS WARMUP WINDOW peer|none
 *   One host: forks a server child before any UCX call (it listens on port 0 and hands its port over
 *   a pipe), then connects to it on 127.0.0.1. peer|none: the endpoints' error handling (ucxx's
 *   endpointErrorHandling(true) = UCP_ERR_HANDLING_MODE_PEER, false = NONE), the same on both sides.
 * Output: one JSON line on stdout, or "FAIL <what>" on stderr and exit 1.
 */
#include <ucxx/api.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr ucxx::Tag TAG_PING{0x7563787862000001ULL};
constexpr ucxx::Tag TAG_PONG{0x7563787862000002ULL};
constexpr ucxx::Tag TAG_ACK{0x7563787862000003ULL};
constexpr ucxx::Tag TAG_DONE{0x7563787862000004ULL};

using Clock = std::chrono::steady_clock;

struct Options {
  std::string test;
  size_t size       = 8;
  size_t iterations = 1000;
  size_t warmup     = 100;
  size_t window     = 32;
  bool errorHandling = false;
};

[[noreturn]] void fail(const std::string& what)
{
  fprintf(stderr, "FAIL %s\n", what.c_str());
  fflush(stderr);
  _exit(1);
}

struct Side {
  std::shared_ptr<ucxx::Context> context;
  std::shared_ptr<ucxx::Worker> worker;
  std::shared_ptr<ucxx::Listener> listener;
  std::shared_ptr<ucxx::Endpoint> endpoint;
  bool errorHandling = false;

  void wait(const std::shared_ptr<ucxx::Request>& r)
  {
    while (!r->isCompleted()) worker->progress();
    r->checkError();
  }

  std::shared_ptr<ucxx::Request> send(const void* p, size_t n, ucxx::Tag tag)
  {
    return endpoint->tagSendBuilder(p, n, tag).build();
  }

  std::shared_ptr<ucxx::Request> recv(void* p, size_t n, ucxx::Tag tag)
  {
    return endpoint->tagRecvBuilder(p, n, tag, ucxx::TagMaskFull).build();
  }

  std::shared_ptr<ucxx::Request> streamSend(const void* p, size_t n)
  {
    return endpoint->streamSendBuilder(p, n).build();
  }

  std::shared_ptr<ucxx::Request> streamRecv(void* p, size_t n)
  {
    return endpoint->streamRecvBuilder(p, n).build();
  }

  // A bounded close: a peer that closed first must not keep this side waiting.
  void close()
  {
    try {
      auto r        = endpoint->closeBuilder().build();
      auto deadline = Clock::now() + std::chrono::seconds(5);
      while (!r->isCompleted() && Clock::now() < deadline) worker->progress();
    } catch (const std::exception&) {
    }
  }
};

void listenerCallback(ucp_conn_request_h connRequest, void* arg)
{
  auto* side = static_cast<Side*>(arg);
  if (side->endpoint != nullptr) {
    (void)ucp_listener_reject(side->listener->getHandle(), connRequest);
    return;
  }
  side->endpoint =
    side->listener->endpointBuilder(connRequest).endpointErrorHandling(side->errorHandling).build();
}

void init(Side& side, bool errorHandling)
{
  side.errorHandling = errorHandling;
  side.context       = ucxx::contextBuilder(ucxx::Context::defaultFeatureFlags).build();
  side.worker        = side.context->workerBuilder().build();
}

// ---- server ---------------------------------------------------------------------------------------

void serve(const Options& o, int portPipe)
{
  Side side;
  init(side, o.errorHandling);
  side.listener = side.worker->listenerBuilder(0, listenerCallback, &side).build();
  uint16_t port = side.listener->getPort();
  if (write(portPipe, &port, sizeof port) != sizeof port) fail("server: writing the port");
  close(portPipe);
  while (side.endpoint == nullptr) side.worker->progress();

  std::vector<uint8_t> buf(std::max<size_t>(o.size, 8));
  const size_t total = o.warmup + o.iterations;
  if (o.test == "tag_lat") {
    for (size_t i = 0; i < total; i++) {
      side.wait(side.recv(buf.data(), o.size, TAG_PING));
      side.wait(side.send(buf.data(), o.size, TAG_PONG));
    }
  } else if (o.test == "stream_bw") {
    for (size_t phase = 0; phase < 2; phase++) {
      size_t n = phase == 0 ? o.warmup : o.iterations;
      for (size_t i = 0; i < n; i++) side.wait(side.streamRecv(buf.data(), o.size));
      uint64_t ack = n;
      side.wait(side.send(&ack, sizeof ack, TAG_ACK));
    }
  } else {
    // Warm-up, then the measured stream: each ends with an ack.
    for (size_t phase = 0; phase < 2; phase++) {
      size_t n = phase == 0 ? o.warmup : o.iterations;
      std::deque<std::shared_ptr<ucxx::Request>> inflight;
      size_t posted = 0;
      while (posted < n || !inflight.empty()) {
        while (posted < n && inflight.size() < o.window) {
          inflight.push_back(side.recv(buf.data(), o.size, TAG_PING));
          posted++;
        }
        side.wait(inflight.front());
        inflight.pop_front();
      }
      uint64_t ack = n;
      side.wait(side.send(&ack, sizeof ack, TAG_ACK));
    }
  }
  uint64_t done = 0;
  side.wait(side.recv(&done, sizeof done, TAG_DONE));
  side.close();
}

// ---- client ---------------------------------------------------------------------------------------

double percentile(std::vector<double> xs, double p)
{
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(xs.size() - 1) + 0.5);
  return xs[std::min(i, xs.size() - 1)];
}

void client(const Options& o, uint16_t port)
{
  Side side;
  init(side, o.errorHandling);
  side.endpoint =
    side.worker->endpointBuilder("127.0.0.1", port).endpointErrorHandling(o.errorHandling).build();

  std::vector<uint8_t> out(std::max<size_t>(o.size, 8));
  std::vector<uint8_t> in(std::max<size_t>(o.size, 8));
  for (size_t i = 0; i < out.size(); i++) out[i] = static_cast<uint8_t>(i * 131 + 7);

  double seconds = 0;
  std::vector<double> samples;
  if (o.test == "tag_lat") {
    samples.reserve(o.iterations);
    Clock::time_point begin;
    for (size_t i = 0; i < o.warmup + o.iterations; i++) {
      if (i == o.warmup) begin = Clock::now();
      auto t0 = Clock::now();
      auto r  = side.recv(in.data(), o.size, TAG_PONG);
      side.wait(side.send(out.data(), o.size, TAG_PING));
      side.wait(r);
      if (i >= o.warmup) samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / 2);
    }
    seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    if (memcmp(in.data(), out.data(), o.size) != 0) fail("tag_lat: the echo differs from what was sent");
  } else {
    for (size_t phase = 0; phase < 2; phase++) {
      size_t n = phase == 0 ? o.warmup : o.iterations;
      auto begin = Clock::now();
      std::deque<std::shared_ptr<ucxx::Request>> inflight;
      size_t posted = 0;
      while (posted < n || !inflight.empty()) {
        while (posted < n && inflight.size() < o.window) {
          inflight.push_back(o.test == "stream_bw" ? side.streamSend(out.data(), o.size)
                                                   : side.send(out.data(), o.size, TAG_PING));
          posted++;
        }
        // The oldest send first: sends complete in order on one endpoint.
        side.wait(inflight.front());
        inflight.pop_front();
      }
      uint64_t ack = 0;
      side.wait(side.recv(&ack, sizeof ack, TAG_ACK));
      if (ack != n) fail(o.test + ": the server acknowledged " + std::to_string(ack) + " of " + std::to_string(n));
      if (phase == 1) seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    }
  }
  uint64_t done = 1;
  side.wait(side.send(&done, sizeof done, TAG_DONE));
  side.close();

  const double n = static_cast<double>(o.iterations);
  char line[1024];
  if (o.test == "tag_lat") {
    snprintf(line, sizeof line,
             "{\"tool\":\"ucxx-cpp\",\"test\":\"%s\",\"size\":%zu,\"iterations\":%zu,\"warmup\":%zu,"
             "\"error_handling\":\"%s\",\"progress\":\"polling\",\"ucx\":\"%s\","
             "\"latency_us\":{\"p50\":%.4f,\"avg\":%.4f,\"p99\":%.4f},\"bandwidth_MBps\":%.3f,\"message_rate\":null}",
             o.test.c_str(), o.size, o.iterations, o.warmup, o.errorHandling ? "peer" : "none",
             ucp_get_version_string(), percentile(samples, 50) * 1e6, seconds / n / 2 * 1e6,
             percentile(samples, 99) * 1e6, static_cast<double>(o.size) * n * 2 / seconds / 1e6);
  } else {
    snprintf(line, sizeof line,
             "{\"tool\":\"ucxx-cpp\",\"test\":\"%s\",\"size\":%zu,\"iterations\":%zu,\"warmup\":%zu,"
             "\"window\":%zu,\"error_handling\":\"%s\",\"progress\":\"polling\",\"ucx\":\"%s\","
             "\"latency_us\":{\"p50\":null,\"avg\":%.4f,\"p99\":null},\"bandwidth_MBps\":%.3f,\"message_rate\":%.1f}",
             o.test.c_str(), o.size, o.iterations, o.warmup, o.window, o.errorHandling ? "peer" : "none",
             ucp_get_version_string(), seconds / n * 1e6, static_cast<double>(o.size) * n / seconds / 1e6,
             n / seconds);
  }
  printf("%s\n", line);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 7) fail("usage: ucxx_bench tag_lat|tag_bw|stream_bw SIZE ITERATIONS WARMUP WINDOW peer|none");
  Options o;
  o.test          = argv[1];
  o.size          = std::stoull(argv[2]);
  o.iterations    = std::stoull(argv[3]);
  o.warmup        = std::stoull(argv[4]);
  o.window        = std::max<size_t>(1, std::stoull(argv[5]));
  o.errorHandling = std::string(argv[6]) == "peer";
  if (o.test != "tag_lat" && o.test != "tag_bw" && o.test != "stream_bw") fail("unknown test " + o.test);
  if (std::string(argv[6]) != "peer" && std::string(argv[6]) != "none") fail("error handling: peer or none");
  if (o.iterations == 0) fail("ITERATIONS must be at least 1");

  // The server is a child forked before either side touches UCX.
  int fds[2];
  if (pipe(fds) != 0) fail("pipe");
  pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    close(fds[0]);
    try {
      serve(o, fds[1]);
    } catch (const std::exception& e) {
      fail(std::string("server: ") + e.what());
    }
    _exit(0);
  }
  close(fds[1]);
  uint16_t port = 0;
  if (read(fds[0], &port, sizeof port) != sizeof port) fail("the server exited before listening");
  close(fds[0]);
  try {
    client(o, port);
  } catch (const std::exception& e) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    fail(std::string("client: ") + e.what());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("the server failed (status " + std::to_string(status) + ")");
  return 0;
}
