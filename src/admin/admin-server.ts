/** Listen on the admin address (never a data port) and close on shutdown. */
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { parseHostPort } from '../address/host-port';

export interface AdminServer {
  readonly app: FastifyInstance;
  readonly address: AddressInfo;
  close(): Promise<void>;
}

export async function startAdminServer(app: FastifyInstance, listen: string): Promise<AdminServer> {
  const hp = parseHostPort(listen, true);
  if (typeof hp === 'string') throw new Error(`admin.listen "${listen}": ${hp}`);
  await app.listen({ host: hp.host, port: hp.port });
  const address = app.server.address() as AddressInfo;
  return {
    app,
    address,
    close: async () => {
      // Idle keep-alive connections of API clients must not hold shutdown open.
      app.server.closeIdleConnections();
      await app.close();
    },
  };
}
