/**
 * RBAC: the ServiceAccount may touch exactly one object, the allowlist ConfigMap, by name.
 * list/watch are limited by resourceNames too: the API server authorizes a list or watch with
 * fieldSelector=metadata.name=<name> as a request for that name. No create (the chart creates the
 * ConfigMap), no delete, nothing namespace-wide.
 */
import t from 'tap';
import { render } from '../helpers/helm';

t.test('the Role grants get/list/watch/update/patch on the allowlist ConfigMap only', async (t) => {
  const out = render({});
  const role = out.one('Role');
  t.same(role.rules, [
    {
      apiGroups: [''],
      resources: ['configmaps'],
      resourceNames: ['edge-ipgate-allowlists'],
      verbs: ['get', 'list', 'watch', 'update', 'patch'],
    },
  ]);
  for (const rule of role.rules as { resourceNames?: string[]; verbs: string[] }[]) {
    t.ok(rule.resourceNames && rule.resourceNames.length === 1, 'every rule names its object');
    t.notOk(
      rule.verbs.some((v) => ['create', 'delete', 'deletecollection', '*'].includes(v)),
      'no create/delete/*',
    );
  }
  t.equal(out.all('ClusterRole').length + out.all('ClusterRoleBinding').length, 0, 'nothing cluster-wide');
  t.equal(
    out.one('ConfigMap', '-allowlists').metadata.name,
    role.rules[0].resourceNames[0],
    'the named object is the one the chart creates',
  );
});

t.test("the RoleBinding binds that Role to the pods' ServiceAccount", async (t) => {
  const out = render({});
  const rb = out.one('RoleBinding');
  t.same(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: out.one('Role').metadata.name });
  t.same(rb.subjects, [{ kind: 'ServiceAccount', name: 'edge-ipgate', namespace: 'ipgate-system' }]);
  t.equal(out.podSpec().serviceAccountName, 'edge-ipgate');
  t.equal(out.one('ServiceAccount').metadata.name, 'edge-ipgate');
});

t.test('a custom store ConfigMap name flows into the Role and the ipgate config', async (t) => {
  const out = render({ store: { configMapName: 'edge-lists' } });
  t.same(out.one('Role').rules[0].resourceNames, ['edge-lists']);
  t.equal(out.one('ConfigMap', 'edge-lists').metadata.name, 'edge-lists');
  t.match(out.one('ConfigMap', '-config').data['config.yaml'], /configMap: edge-lists/);
});

t.test('the allowlist ConfigMap survives uninstall and carries no data the chart would fight over', async (t) => {
  const cm = render({ allowlists: { default: ['203.0.113.0/24'] } }).one('ConfigMap', '-allowlists');
  t.equal(cm.metadata.annotations!['helm.sh/resource-policy'], 'keep');
  t.equal(cm.data, undefined, 'ipgate seeds it from config.yaml; helm upgrades must not revert API edits');
});

t.test('rbac.create=false and serviceAccount.create=false render neither', async (t) => {
  const out = render({ rbac: { create: false }, serviceAccount: { create: false, name: 'prepared-sa' } });
  t.equal(out.all('Role').length + out.all('RoleBinding').length + out.all('ServiceAccount').length, 0);
  t.equal(out.podSpec().serviceAccountName, 'prepared-sa');
});
