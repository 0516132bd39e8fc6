import t from 'tap';
import * as prom from 'prom-client';
import { Registry, registrySource } from '../../../src/metrics/prom-registry';

t.test("the Registry is prom-client's own, loaded from its file without the rest of the package", async (t) => {
  t.equal(registrySource, 'lib/registry', 'the file is where prom-client 15 keeps it (an upgrade that moves it fails here)');
  t.equal(Registry, prom.Registry, 'the same class prom-client exports');
  const r = new Registry();
  t.equal(typeof r.metrics, 'function');
  t.equal((await r.metrics()).trim(), '', 'an empty registry exposes nothing');
});
