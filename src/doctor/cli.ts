/**
 * `ipgate doctor`: read the cluster, say where the client IP is lost and what to change.
 * Exit codes: 0 no error findings, 1 error findings, 2 could not run (bad flags, no credentials,
 * Kubernetes API unreachable or refusing).
 */
import YAML from 'yaml';
import { ADMIN_OPTIONS, adminOptionsUsage, outputFormat, parseCommandLine, tokenFromFile } from '../cli/common';
import { fetchReadyz } from './admin-readyz';
import { analyse } from './analyse';
import { analyseAdmin } from './analyse-admin';
import { analyseCertificates } from './analyse-certificates';
import { collectCertificates } from './certificates';
import { collectSnapshot, findChartService } from './collect';
import { asDoctorError } from './errors';
import { exitCodeFor, type Finding } from './finding';
import { KubeClient } from '../kube/kube-client';
import { resolveKubeAccess } from '../kube/kubeconfig';
import { renderFailureJson, renderJson, renderText } from './report';

const DOCTOR_USAGE = `usage: ipgate doctor [flags]

Checks how client addresses reach ipgate in this cluster and prints findings with fixes
(with --config, also the TLS listeners' certificates; with --admin-url, ipgate's own /readyz).

  --kubeconfig PATH       kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)
  --context NAME          kubeconfig context (default: current-context)
  --namespace NS          namespace of the ipgate Service (default: the context's, else "default")
  --service NAME          ipgate Service name (default: the namespace's one Service the Helm chart
                          labels app.kubernetes.io/part-of=ipgate, component=controller, named
                          <release>-ipgate or <release>; without such a Service: ipgate)
  --admin-token-env NAME  environment variable holding the admin bearer token (instead of --token-file)
  --config FILE           also check the certificates FILE's TLS listeners name (tls.certificates[]),
                          read from this machine: expired, not yet valid, expiring within 14 days,
                          unreadable, a key that is not the certificate's
  --no-cluster            skip the Kubernetes checks: report --admin-url's /readyz and/or the
                          --config certificates only (e.g. inside the pod, where the certificate files
                          are mounted and the service account may not read Services)

Options shared with \`ipgate allowlist\` (with --admin-url, ipgate's /readyz detail is reported;
without it the admin API is not asked):
${adminOptionsUsage(false, 'the report')}
Flags take their value as --flag=value or --flag value.

exit code: 0 no errors, 1 error findings, 2 could not read the Kubernetes API or --config (or bad flags)
`;

/** Injection points for tests; the defaults are the process's own. */
interface DoctorDeps {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: NodeJS.ProcessEnv;
  /** Per Kubernetes API request. */
  timeoutMs: number;
  serviceAccountDir?: string;
}

export async function doctorMain(argv: string[], deps: Partial<DoctorDeps> = {}): Promise<number> {
  const stdout = deps.stdout ?? process.stdout;
  const stderr = deps.stderr ?? process.stderr;
  const env = deps.env ?? process.env;

  let values: ReturnType<typeof parse>['values'];
  let format: ReturnType<typeof outputFormat>;
  let fileToken: string | null;
  try {
    values = parse(argv).values;
    format = outputFormat(values);
    if (values['token-file'] !== undefined && values['admin-token-env'] !== undefined) {
      throw new Error('--token-file and --admin-token-env: give one of them');
    }
    if (values['no-cluster'] === true && values.config === undefined && values['admin-url'] === undefined) {
      throw new Error("--no-cluster leaves nothing to check: add --admin-url (ipgate's /readyz) and/or --config (certificates)");
    }
    fileToken = values.help ? null : tokenFromFile(values['token-file']);
  } catch (err) {
    stderr.write(`ipgate doctor: ${(err as Error).message}\n\n${DOCTOR_USAGE}`);
    return 2;
  }
  if (values.help) {
    stdout.write(DOCTOR_USAGE);
    return 0;
  }
  const json = format !== 'table';
  const doc = (jsonText: string): string => (format === 'yaml' ? YAML.stringify(JSON.parse(jsonText)) : jsonText);

  let client: KubeClient | undefined;
  try {
    // Read first: a --config that cannot be read ends the run before any API request.
    const certFindings = values.config !== undefined ? analyseCertificates(collectCertificates(values.config)) : [];
    let admin = null;
    if (values['admin-url']) {
      const tokenEnv = values['admin-token-env'];
      const token = fileToken ?? (tokenEnv ? env[tokenEnv] : undefined);
      admin = fetchReadyz({
        adminUrl: values['admin-url'],
        ...(token ? { token } : {}),
        ...(tokenEnv && !token ? { tokenProblem: `--admin-token-env ${tokenEnv}: that variable is unset or empty` } : {}),
      });
    }
    if (values['no-cluster'] === true) {
      const findings: Finding[] = [];
      if (admin !== null) analyseAdmin(await admin, findings, null);
      findings.push(...certFindings);
      const code = exitCodeFor(findings);
      const source = [
        '--no-cluster',
        ...(values['admin-url'] ? [`--admin-url ${values['admin-url']}`] : []),
        ...(values.config !== undefined ? [`--config ${values.config}`] : []),
      ].join(', ');
      const header = { service: '-', source, server: '-' };
      stdout.write(json ? doc(renderJson(header, findings, code)) : renderText(header, findings));
      return code;
    }
    const access = resolveKubeAccess({
      kubeconfig: values.kubeconfig,
      context: values.context,
      env,
      serviceAccountDir: deps.serviceAccountDir,
    });
    client = new KubeClient(access, { timeoutMs: deps.timeoutMs ?? 10_000, userAgent: 'ipgate-doctor' });
    const namespace = values.namespace ?? access.namespace ?? 'default';
    const serviceName = values.service ?? (await findChartService(client, namespace));

    const snapshot = await collectSnapshot(client, { namespace, serviceName, admin });
    const findings = [...analyse(snapshot), ...certFindings];
    const code = exitCodeFor(findings);
    const header = { service: `${namespace}/${serviceName}`, source: access.source, server: access.server.origin };
    stdout.write(json ? doc(renderJson(header, findings, code)) : renderText(header, findings));
    return code;
  } catch (err) {
    const failure = asDoctorError(err);
    if (!failure) throw err;
    if (json) stdout.write(doc(renderFailureJson(failure.code, failure.message)));
    else stderr.write(`ipgate doctor: ${failure.message}\n`);
    return 2;
  } finally {
    client?.close();
  }
}

function parse(argv: string[]) {
  return parseCommandLine(
    argv,
    {
      ...ADMIN_OPTIONS,
      kubeconfig: { type: 'string' },
      context: { type: 'string' },
      namespace: { type: 'string', short: 'n' },
      service: { type: 'string' },
      'admin-token-env': { type: 'string' },
      config: { type: 'string' },
      'no-cluster': { type: 'boolean' },
    },
    false,
  );
}
