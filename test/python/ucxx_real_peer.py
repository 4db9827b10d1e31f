"""A peer written with real ucxx Python's asyncio API (ucxx-cu12 0.52, the wheel in .venv), as a ucxx
user writes one: ucxx.create_listener / ucxx.create_endpoint, then Endpoint.send/recv (with and without
user tags), send_obj/recv_obj, send_multi/recv_multi, am_send/am_recv and close. Driven by
test/ucxx-real-python.test.ts, in both roles.

Usage:  python -u ucxx_real_peer.py server SCENARIO            listen on a free port, print "PORT <n>"
        python -u ucxx_real_peer.py client HOST PORT SCENARIO  connect to HOST:PORT
Result: "OK" and exit 0, or "FAIL <what>" and exit 1; SIGALRM (sent by the test when it gives up) prints
"FAIL timed out in phase: <phase>".

Pattern (as test/helpers/pattern.ts cPattern): byte i with seed s is ((i*131 + s*7 + (i>>8)) ^ (i>>16)) & 0xff.

Scenarios:
  full      ucxx-ts sends, in order: SEND_SIZES with send (seed 100 + i); 8 bytes with user tag USER_TAG
            (seed 7); 8 bytes with FORCED_TAG and force_tag (seed 8); OBJ_SIZES with send_obj (seed
            200 + i); MULTI_SIZES with send_multi (seed 300 + i); MANY_SIZES (seed 400 + i); AM_SIZES as
            ucxx active messages (seed 500 + i). This program receives and checks each, then sends the
            same set with seeds + 1000, then waits for "DONE" (send/recv) and closes its endpoint.
  close-py  after the handshake this program closes its endpoint at once.
  close-ts  prints RECEIVING and waits in recv until ucxx-ts closes its endpoint; the recv must raise
            (prints "RECV RAISED <class>: <message>").
  source    prints READY and keeps sending SOURCE_SIZE-byte messages (seed 51) until it is killed.
  echo-client  (client) send_obj of 1000 bytes (seed 77), recv_obj, check, print ECHOED, close.
  echo-full-client  (client) echo:N's other side: send_obj of 64 KiB (seed 77), recv_obj, recv_multi, recv
            of 8 bytes; prints "ECHO OK" when all arrived whole, or "ECHO RAISED <class>: <message>".
  echo:N    (server) ucxx's send_recv echo, for N connections one after the other: recv_obj, then at once
            send_obj of it, send_multi of [it, 100 bytes (seed 9)], send of 8 bytes (seed 10), and close:
            the peer receives after this side has closed.
  quickstart:N:SIZE  (server) ucxx's quickstart, for N connections one after the other: recv of SIZE bytes,
            check they are all 0, add 1 to each, send them back and close at once.
  quickstart-client:SIZE  (client) the quickstart's client: send SIZE zero bytes, recv SIZE bytes, print
            "QUICKSTART OK" when every byte is 1, or "QUICKSTART RAISED <class>: <message>".
"""

import asyncio
import os
import signal
import sys

import numpy as np
import ucxx

KiB = 1024
MiB = 1024 * KiB
SEND_SIZES = [0, 1, 8 * KiB + 3, 3 * MiB]
OBJ_SIZES = [0, 17, 2 * MiB + 5]
MULTI_SIZES = [0, 1, 100, 64 * KiB, 5 * MiB + 1]
MANY_SIZES = [(i * 37) % 300 for i in range(150)]
AM_SIZES = [1, 100, 8 * KiB, 4 * MiB]
USER_TAG = -7
FORCED_TAG = 0xFEEDFACECAFEBEEF
SOURCE_SIZE = 16 * MiB

phase = "start"


def on_alarm(signum, frame):
    os.write(1, f"FAIL timed out in phase: {phase}\n".encode())
    os._exit(1)


def fail(what):
    print(f"FAIL {what}", flush=True)
    os._exit(1)


def pattern(n, seed):
    i = np.arange(n, dtype=np.uint64)
    return (((i * 131 + seed * 7 + (i >> 8)) ^ (i >> 16)) & 0xFF).astype(np.uint8)


def check(buffer, n, seed, what):
    got = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8) if n > 0 else np.empty(0, np.uint8)
    if got.size != n:
        fail(f"{what}: {got.size} bytes, expected {n}")
    want = pattern(n, seed)
    bad = np.nonzero(got != want)[0]
    if bad.size:
        i = int(bad[0])
        fail(f"{what}: byte {i} of {n} is {int(got[i])}, expected {int(want[i])}")


def step(name):
    global phase
    phase = name


async def receive_all(ep, base):
    for i, n in enumerate(SEND_SIZES):
        step(f"recv {i}")
        buf = np.empty(n, dtype=np.uint8)
        await ep.recv(buf)
        check(buf, n, base + 100 + i, f"recv {i}")
    step("recv with a user tag")
    buf = np.empty(8, dtype=np.uint8)
    await ep.recv(buf, tag=USER_TAG)
    check(buf, 8, base + 7, "recv with a user tag")
    step("recv with a forced tag")
    buf = np.empty(8, dtype=np.uint8)
    await ep.recv(buf, tag=FORCED_TAG, force_tag=True)
    check(buf, 8, base + 8, "recv with a forced tag")
    for i, n in enumerate(OBJ_SIZES):
        step(f"recv_obj {i}")
        obj = await ep.recv_obj()
        check(obj, n, base + 200 + i, f"recv_obj {i}")
    for sizes, seed, name in ((MULTI_SIZES, 300, "recv_multi"), (MANY_SIZES, 400, "recv_multi of 150")):
        step(name)
        frames = await ep.recv_multi()
        if len(frames) != len(sizes):
            fail(f"{name}: {len(frames)} frames, expected {len(sizes)}")
        for i, (frame, n) in enumerate(zip(frames, sizes)):
            check(frame, n, base + seed + i, f"{name} frame {i}")
    for i, n in enumerate(AM_SIZES):
        step(f"am_recv {i}")
        data = await ep.am_recv()
        check(data, n, base + 500 + i, f"am_recv {i}")


async def send_all(ep, base):
    for i, n in enumerate(SEND_SIZES):
        step(f"send {i}")
        await ep.send(pattern(n, base + 100 + i))
    step("send with a user tag")
    await ep.send(pattern(8, base + 7), tag=USER_TAG)
    step("send with a forced tag")
    await ep.send(pattern(8, base + 8), tag=FORCED_TAG, force_tag=True)
    for i, n in enumerate(OBJ_SIZES):
        step(f"send_obj {i}")
        await ep.send_obj(bytes(pattern(n, base + 200 + i)))
    for sizes, seed, name in ((MULTI_SIZES, 300, "send_multi"), (MANY_SIZES, 400, "send_multi of 150")):
        step(name)
        await ep.send_multi([pattern(n, base + seed + i) for i, n in enumerate(sizes)])
    for i, n in enumerate(AM_SIZES):
        step(f"am_send {i}")
        await ep.am_send(pattern(n, base + 500 + i))


async def scenario(ep, name):
    if name == "full":
        await receive_all(ep, 0)
        print("RECEIVED ALL", flush=True)
        await send_all(ep, 1000)
        step("waiting for DONE")
        done = bytearray(4)
        await ep.recv(done)
        if bytes(done) != b"DONE":
            fail(f"the acknowledgement is {bytes(done)!r}")
        step("closing")
        await ep.close()
    elif name == "close-py":
        step("closing at once")
        await ep.close()
    elif name == "close-ts":
        step("recv until ucxx-ts closes")
        print("RECEIVING", flush=True)
        try:
            await asyncio.wait_for(ep.recv(bytearray(8)), 20)
        except asyncio.TimeoutError:
            fail("recv did not end within 20 s of ucxx-ts's close")
        except Exception as e:  # what ucxx raises is what this test reports
            print(f"RECV RAISED {type(e).__name__}: {e}", flush=True)
        else:
            fail("recv completed although ucxx-ts sent nothing")
        ep.abort()
    elif name == "echo-client":
        step("echo-client: send_obj, recv_obj")
        data = bytes(pattern(1000, 77))
        await ep.send_obj(data)
        back = await ep.recv_obj()
        if bytes(back) != data:
            fail(f"the echo differs: {len(back)} bytes")
        print("ECHOED", flush=True)
        await ep.close()
    elif name == "echo-full-client":
        step("echo-full-client: send_obj, recv_obj, recv_multi, recv")
        data = bytes(pattern(64 * KiB, 77))
        await ep.send_obj(data)
        try:
            back = await ep.recv_obj()
            frames = await ep.recv_multi()
            last = bytearray(8)
            await ep.recv(last)
        except Exception as e:  # what ucxx raises is what this test reports
            print(f"ECHO RAISED {type(e).__name__}: {e}", flush=True)
        else:
            if bytes(back) != data or len(frames) != 2 or bytes(frames[0]) != data or bytes(last) != bytes(pattern(8, 10)):
                fail("echo-full-client: the echo differs")
            print("ECHO OK", flush=True)
        await ep.close()
    elif name.startswith("echo"):
        step("echo: recv_obj")
        obj = await ep.recv_obj()
        step("echo: send_obj, send_multi, send, close")
        await ep.send_obj(obj)
        await ep.send_multi([np.frombuffer(bytes(obj), dtype=np.uint8), pattern(100, 9)])
        await ep.send(pattern(8, 10))
        await ep.close()
    elif name.startswith("quickstart-client:"):
        size = int(name.split(":")[1])
        step("quickstart-client: send, recv")
        await ep.send(np.zeros(size, dtype="u1"))
        back = np.empty(size, dtype="u1")
        try:
            await ep.recv(back)
        except Exception as e:  # what ucxx raises is what this test reports
            print(f"QUICKSTART RAISED {type(e).__name__}: {e}", flush=True)
        else:
            if np.count_nonzero(back != 1) != 0:
                fail("quickstart-client: a byte is not 1")
            print("QUICKSTART OK", flush=True)
        await ep.close()
    elif name.startswith("quickstart:"):
        size = int(name.split(":")[2])
        step("quickstart: recv")
        arr = np.empty(size, dtype="u1")
        await ep.recv(arr)
        if np.count_nonzero(arr) != 0:
            fail("quickstart: the client's bytes are not all 0")
        arr += 1
        step("quickstart: send, close")
        await ep.send(arr)
        await ep.close()
    elif name == "source":
        data = pattern(SOURCE_SIZE, 51)
        print("READY", flush=True)
        while True:
            step("source: send")
            await ep.send(data)
    else:
        fail(f"unknown scenario {name}")


async def main(argv):
    role = argv[1]
    if role == "server":
        name = argv[2]
        finished = asyncio.get_running_loop().create_future()
        many = name.startswith("echo:") or name.startswith("quickstart:")
        remaining = [int(name.split(":")[1]) if many else 1]

        async def handler(ep):
            try:
                await scenario(ep, name)
                remaining[0] -= 1
                if remaining[0] == 0:
                    finished.set_result(None)
            except Exception as e:
                if not finished.done():
                    finished.set_exception(e)

        step("creating the listener")
        listener = ucxx.create_listener(handler, port=0)
        print(f"PORT {listener.port}", flush=True)
        step("waiting for a connection")
        await finished
        listener.close()
    else:
        host, port, name = argv[2], int(argv[3]), argv[4]
        step("connecting")
        ep = await ucxx.create_endpoint(host, port)
        await scenario(ep, name)


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, on_alarm)
    try:
        asyncio.run(main(sys.argv))
    except Exception as e:
        fail(f"in phase {phase}: {type(e).__name__}: {e}")
    print("OK", flush=True)
