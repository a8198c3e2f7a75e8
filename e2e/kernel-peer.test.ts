/**
 * The peer is the VIP: a socket whose connect() the kernel sent to a backend
 * reports the VIP from getpeername() (cgroup/getpeername4), and a connected
 * UDP socket receives the backend's replies from the VIP (cgroup/recvmsg4).
 * A dual-stack socket (AF_INET6) reaching the IPv4 VIP as ::ffff:VIP is
 * steered too (cgroup/connect6 and sendmsg6 look the VIP up among the IPv4
 * services). The client is a real process in a workload cgroup.
 */
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { peerClient as client, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const VIP = '127.100.6.1';
const PORT = 8095;
const BACKEND = '127.0.6.1';

describe('the peer of a socket sent to a backend is the VIP', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let dir: string;

  before(() => {
    cg = testCgroup('peer');
    dir = cg.child('w');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r1/z1/s1'), []);
    const s: ServiceSpec = spec('peer', VIP, PORT, 'failover', [['b1', BACKEND, 'r1/z1/s1']]);
    const mesh = new Mesh();
    mesh.put(s);
    const st = mesh.get('peer')!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    assert.deepEqual(dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]).rejected, []);
  });

  after(() => {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('TCP: getpeername() reports the VIP, while the backend answered', async () => {
    const server = await idBackend(BACKEND, PORT, 'b1');
    try {
      const r = await client(dir, VIP, PORT, 'tcp');
      assert.deepEqual(r, { id: 'b1', peer: { address: VIP, port: PORT } });
      // Not through a VIP: the peer is what was connected to.
      assert.deepEqual(await client(dir, BACKEND, PORT, 'tcp'), { id: 'b1', peer: { address: BACKEND, port: PORT } });
    } finally {
      await server.close();
    }
  });

  it('connected UDP: replies arrive from the VIP, and getpeername() reports it', async () => {
    const server = dgram.createSocket('udp4');
    server.on('message', (_m, r) => server.send('b1', r.port, r.address));
    await new Promise<void>((resolve) => server.bind(PORT, BACKEND, () => resolve()));
    try {
      const r = await client(dir, VIP, PORT, 'udp');
      assert.deepEqual(r, {
        id: 'b1',
        peer: { address: VIP, port: PORT, family: 'IPv4' },
        from: { address: VIP, port: PORT },
      });
      // Unconnected: three sendto() the VIP reach the backend (sendmsg4) and every reply comes from the VIP.
      const u = await client(dir, VIP, PORT, 'sendto');
      assert.deepEqual(u, {
        replies: Array.from({ length: 3 }, () => ({ id: 'b1', from: { address: VIP, port: PORT } })),
      });
    } finally {
      server.close();
    }
  });

  it('dual-stack: connect() and sendto() ::ffff:VIP on an IPv6 socket reach the backend; the peer is ::ffff:VIP', async () => {
    const mapped = `::ffff:${VIP}`;
    const tcp = await idBackend(BACKEND, PORT, 'b1');
    try {
      // net.connect to an IPv6 literal opens an AF_INET6 socket: the kernel runs connect6, not connect4.
      assert.deepEqual(await client(dir, mapped, PORT, 'tcp'), { id: 'b1', peer: { address: mapped, port: PORT } });
      // Not a VIP: left alone (refused: nothing listens on ::ffff:127.0.6.2).
      assert.deepEqual(await client(dir, '::ffff:127.0.6.2', PORT, 'tcp'), { error: 'ECONNREFUSED' });
    } finally {
      await tcp.close();
    }
    const udp = dgram.createSocket('udp4');
    udp.on('message', (_m, r) => udp.send('b1', r.port, r.address));
    await new Promise<void>((resolve) => udp.bind(PORT, BACKEND, () => resolve()));
    try {
      const u = await client(dir, mapped, PORT, 'sendto');
      assert.deepEqual(u, {
        replies: Array.from({ length: 3 }, () => ({ id: 'b1', from: { address: mapped, port: PORT } })),
      });
    } finally {
      udp.close();
    }
  });
});
