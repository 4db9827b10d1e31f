// Unit tests of the ucp_ep_print_info parser behind endpoint.getTransports(), against outputs captured
// from UCX 1.13.1 (Debian 12, x86-64) on the development machine, plus lines built from the format in
// ucp_ep.c for what this machine cannot produce (RDMA devices, dotted device names, a wireup stub).
import { test } from 'node:test';
import { strict as assert } from 'node:assert';
import { Context } from 'ucxx-ts';
import { parseEndpointInfo } from '#ucxx-ts/internal/endpoint-info.js';

/** Client-server endpoint, one host, UCX defaults plus UCX_MM_ERROR_HANDLING=y. */
const ONE_HOST_SHM = `#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]: cm rdmacm
#                 lane[1]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] amo#0 am am_bw#0 keepalive
#                 lane[2]:  4:posix/memory.0 md[3]          -> md[3]/posix/sysdev[255] amo#1
#                 lane[3]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 wireup
#                 lane[4]:  1:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] rma_bw#1
#
#                tag_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..93..<egr/bcopy>..262144..<rndv>..(inf)
#           tag_send_sync: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#             stream_send: 0..<egr/short>..93..<egr/bcopy>..(inf)
#                 am_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#                  put[1]: 0..<short>..4294967296..<bcopy>..(inf)
#                  get[1]: 0..<bcopy>..(inf)
#                  put[2]: 0..<short>..4294967296..<bcopy>..(inf)
#                  get[2]: 0..<bcopy>..(inf)
#
#                  rma_bw: mds [1] rndv_rkey_size 10
#
`;

/** The same with UCX_MM_ERROR_HANDLING=n: peer error handling leaves shared memory out of the lanes. */
const ONE_HOST_NO_SHM = `#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]: cm rdmacm
#                 lane[1]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup
#                 lane[2]:  1:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] rma_bw#1
#
#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..262144..<rndv>..(inf)
#           tag_send_sync: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#             stream_send: 0..<egr/short>..8185..<egr/zcopy>..(inf)
#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#
#                  rma_bw: mds [1] rndv_rkey_size 10
#
`;

/** Client side between two network + UTS + IPC namespaces joined by a veth pair (test/helpers/two-hosts.ts). */
const TWO_HOSTS = `#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]: cm rdmacm
#                 lane[1]:  2:tcp/vA.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup
#
#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..19522..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..262144..<rndv>..(inf)
#           tag_send_sync: 0..<egr/short>..8185..<egr/zcopy>..19522..<rndv>..(inf)
#             stream_send: 0..<egr/short>..8185..<egr/zcopy>..(inf)
#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..19522..<rndv>..(inf)
#
#                  rma_bw: mds [1] rndv_rkey_size 10
#
`;

/** connectToAddress between two workers of one process (no cm lane, RMA over shared memory). */
const BY_ADDRESS = `#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] amo#0 am am_bw#0 keepalive
#                 lane[1]:  4:posix/memory.0 md[3]          -> md[3]/posix/sysdev[255] amo#1
#
#                tag_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..93..<egr/bcopy>..262144..<rndv>..(inf)
#           tag_send_sync: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#             stream_send: 0..<egr/short>..93..<egr/bcopy>..(inf)
#                 am_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#                  put[0]: 0..<short>..4294967296..<bcopy>..(inf)
#                  get[0]: 0..<bcopy>..(inf)
#                  put[1]: 0..<short>..4294967296..<bcopy>..(inf)
#                  get[1]: 0..<bcopy>..(inf)
#
#                  rma_bw: mds rndv_rkey_size 9
#
`;

/** UCX_TLS=tcp, connectToAddress. */
const TCP_ONLY = `#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]:  1:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup
#
#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)
#
#                  rma_bw: mds rndv_rkey_size 9
#
`;

const summary = (text: string): string[] =>
  parseEndpointInfo(text).lanes.map((l) => `${l.lane} ${l.transport}/${l.device} ${l.usage.join(',')}`);

test('one host, shared memory lanes: transports, devices, memory domains and usage', () => {
  const { lanes, rmaBwMemoryDomains } = parseEndpointInfo(ONE_HOST_SHM);
  assert.deepEqual(summary(ONE_HOST_SHM), [
    '0 rdmacm/ cm',
    '1 sysv/memory rma,amo,am,am_bw,keepalive',
    '2 posix/memory rma,amo',
    '3 tcp/lo rma_bw,wireup',
    '4 tcp/eth0 rma_bw',
  ]);
  assert.deepEqual(lanes[1], {
    lane: 1, transport: 'sysv', device: 'memory', memoryDomain: 2, remoteMemoryDomain: 2, remoteComponent: 'sysv',
    usage: ['rma', 'amo', 'am', 'am_bw', 'keepalive'], resourceIndex: 3, pathIndex: 0, remoteSystemDevice: 255,
  });
  assert.deepEqual(lanes[0], {
    lane: 0, transport: 'rdmacm', device: '', memoryDomain: null, remoteMemoryDomain: null, remoteComponent: null,
    usage: ['cm'], resourceIndex: null, pathIndex: null, remoteSystemDevice: null,
  });
  assert.deepEqual(rmaBwMemoryDomains, [1]);
});

test('one host without shared memory lanes, two hosts, by address, tcp only', () => {
  assert.deepEqual(summary(ONE_HOST_NO_SHM), ['0 rdmacm/ cm', '1 tcp/lo rma_bw,am,am_bw,wireup', '2 tcp/eth0 rma_bw']);
  assert.deepEqual(summary(TWO_HOSTS), ['0 rdmacm/ cm', '1 tcp/vA rma_bw,am,am_bw,wireup']);
  assert.deepEqual(summary(BY_ADDRESS), ['0 sysv/memory rma,amo,am,am_bw,keepalive', '1 posix/memory rma,amo']);
  assert.deepEqual(summary(TCP_ONLY), ['0 tcp/lo am,am_bw,keepalive,wireup']);
  assert.deepEqual(parseEndpointInfo(BY_ADDRESS).rmaBwMemoryDomains, []);
});

test('format corners: dotted and colon device names, addr[] prefix, wireup stub, unknown roles, priorities', () => {
  const text = [
    '#                 lane[0]:  5:rc_mlx5/mlx5_0:1.0 md[4]      -> md[3]/ib/sysdev[2] rma_bw#0 amo#0 tag_offload',
    '#                 lane[1]:  7:tcp/enp1s0f0.100.1 md[1]     -> addr[3].md[1]/tcp/sysdev[255] am wireup{ud_verbs/mlx5_0:1}',
    '#                 lane[2]: 12:cuda_ipc/cuda.0 md[6]  -> md[6]/cuda_ipc/sysdev[0] rkey_ptr some_future_role',
    '#                 put[0]: 0..<short>..100..<bcopy>..(inf)',
  ].join('\n');
  const lanes = parseEndpointInfo(text).lanes;
  assert.equal(lanes.length, 3);
  assert.deepEqual(
    lanes.map((l) => [l.transport, l.device, l.pathIndex, l.memoryDomain, l.remoteMemoryDomain, l.remoteComponent, l.remoteSystemDevice]),
    [
      ['rc_mlx5', 'mlx5_0:1', 0, 4, 3, 'ib', 2],
      ['tcp', 'enp1s0f0.100', 1, 1, 1, 'tcp', 255],
      ['cuda_ipc', 'cuda', 0, 6, 6, 'cuda_ipc', 0],
    ],
  );
  assert.deepEqual(lanes.map((l) => l.usage), [['rma', 'rma_bw', 'amo', 'tag_offload'], ['am', 'wireup'], ['rkey_ptr']]);
});

test('a lane line that does not parse is an error, not a silently missing lane', () => {
  assert.throws(() => parseEndpointInfo('#   lane[0]: something new'), /cannot parse the lane line/);
  assert.deepEqual(parseEndpointInfo('').lanes, []);
});

test('getTransports() on live endpoints: shared memory by address, and the closed endpoint throws', async () => {
  const context = new Context();
  try {
    const a = context.createWorker({ progressMode: 'polling' });
    const b = context.createWorker({ progressMode: 'polling' });
    const ep = a.connectToAddress(b.getAddress());
    await ep.flush();
    const transports = ep.getTransports();
    assert.ok(transports.length > 0);
    for (const t of transports) assert.ok(t.usage.length > 0, `lane ${t.lane} has a usage`);
    assert.ok(transports.some((t) => t.usage.includes('am')), 'one lane carries active messages');
    await ep.close();
    assert.throws(() => ep.getTransports(), /closed/i);
  } finally {
    await context.close();
  }
});

test("remoteAddress and peer: the server's address on a connected endpoint, the client's on an accepted one, none by worker address", async () => {
  await using context = new Context();
  const server = context.createWorker();
  const client = context.createWorker();
  const listener = server.listen({ host: '127.0.0.1', port: 0 });
  const accepted = listener[Symbol.asyncIterator]().next();
  const ep = await client.connect('127.0.0.1', listener.port);
  const next = await accepted;
  assert.ok(next.done !== true);
  const served = next.value;
  assert.deepEqual(ep.remoteAddress, { host: '127.0.0.1', port: listener.port });
  const from = served.remoteAddress;
  assert.ok(from !== undefined, 'the accepted endpoint knows its client');
  assert.equal(from.host, '127.0.0.1');
  assert.ok(Number.isInteger(from.port) && from.port > 0 && from.port !== listener.port, `client port ${from.port}`);
  assert.equal(served.peer, `connection from 127.0.0.1:${from.port} to listener :${listener.port}`);
  // The client's side of the connection manager's socket is that port.
  const back = new Uint8Array(4);
  const receive = served.tagRecv(back, 3n);
  await ep.tagSend(new Uint8Array([1, 2, 3, 4]), 3n);
  assert.equal((await receive).length, 4);
  const byAddress = client.connectToAddress(server.getAddress());
  assert.equal(byAddress.remoteAddress, undefined);
  await byAddress.close();
  await ep.close();
  await served.close();
  listener.close();
});
