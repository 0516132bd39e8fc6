/**
 * Real Tomcat 10 (Debian's tomcat10: /usr/share/tomcat10) for tests that need a servlet
 * container's reading of a request: its request-target checks, its path parameters (every segment
 * cut at its ";" before dot segments are resolved, so `/public/..;/admin/` is `/admin/`) and its
 * virtual hosts. The test makes a CATALINA_BASE in a temp dir: one HTTP Connector on a loopback
 * port, one <Host> per virtual host, each with a ROOT webapp of static files served by the
 * DefaultServlet (welcome file index.html). `catalina.sh run` execs the JVM in the foreground;
 * the server is ready when it logs "Server startup in" (the Connector binds before the webapps
 * deploy, so a listening port is not enough). JAR scanning and JIT tiers are cut to start faster
 * (about 1 s of Tomcat's own start, 3-8 s with the JVM on a loaded 2-core machine).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { tmpDir } from './ipgate';
import { freePort } from './net';

export const CATALINA_HOME = '/usr/share/tomcat10';

/** Skip reason when Tomcat is missing locally; in CI a missing Tomcat is a failure (.ci/run installs tomcat10). */
export function tomcatMissing(): string | false {
  if (fs.existsSync(path.join(CATALINA_HOME, 'bin/catalina.sh'))) return false;
  if (process.env.CI) throw new Error('tomcat10 is not installed: .ci/run must install it');
  return 'tomcat10 is not installed (apt-get install tomcat10)';
}

export interface TomcatHost {
  /** The <Host name>: matched case-insensitively against the request's Host (port cut). */
  name: string;
  /** Files of its ROOT webapp: path below the webapp (`admin/index.html`) -> content. */
  files: Record<string, string>;
}

export interface Tomcat {
  port: number;
  output: () => string;
}

const WEB_XML = `<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true">
  <servlet>
    <servlet-name>default</servlet-name>
    <servlet-class>org.apache.catalina.servlets.DefaultServlet</servlet-class>
    <init-param><param-name>listings</param-name><param-value>false</param-value></init-param>
    <load-on-startup>1</load-on-startup>
  </servlet>
  <servlet-mapping><servlet-name>default</servlet-name><url-pattern>/</url-pattern></servlet-mapping>
  <welcome-file-list><welcome-file>index.html</welcome-file></welcome-file-list>
</web-app>
`;

/** Start Tomcat with `hosts` (the first is the default host); stopped at teardown. */
export async function startTomcat(t: Test, hosts: TomcatHost[], ms = 60_000): Promise<Tomcat> {
  const base = tmpDir('ipgate-tomcat-');
  const port = await freePort();
  for (const d of ['conf', 'logs', 'temp', 'work']) fs.mkdirSync(path.join(base, d));
  const hostXml = hosts
    .map((h, i) => {
      const appBase = path.join(base, `webapps-${i}`);
      for (const [file, content] of Object.entries(h.files)) {
        const p = path.join(appBase, 'ROOT', file);
        fs.mkdirSync(path.dirname(p), { recursive: true });
        fs.writeFileSync(p, content);
      }
      fs.mkdirSync(path.join(appBase, 'ROOT'), { recursive: true });
      return `      <Host name="${h.name}" appBase="${appBase}" unpackWARs="false" autoDeploy="false"/>`;
    })
    .join('\n');
  fs.writeFileSync(
    path.join(base, 'conf/server.xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="${port}" address="127.0.0.1" protocol="HTTP/1.1" connectionTimeout="20000" maxKeepAliveRequests="-1"/>
    <Engine name="Catalina" defaultHost="${hosts[0]!.name}">
${hostXml}
    </Engine>
  </Service>
</Server>
`,
  );
  fs.writeFileSync(path.join(base, 'conf/web.xml'), WEB_XML);
  fs.writeFileSync(
    path.join(base, 'conf/context.xml'),
    '<?xml version="1.0" encoding="UTF-8"?>\n<Context><JarScanner scanClassPath="false" scanManifest="false"/></Context>\n',
  );

  const child = spawn(path.join(CATALINA_HOME, 'bin/catalina.sh'), ['run'], {
    cwd: base,
    env: { ...process.env, CATALINA_HOME, CATALINA_BASE: base, JAVA_OPTS: '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let wake: (() => void) | null = null;
  const onData = (c: Buffer): void => {
    out += c.toString();
    wake?.();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((r) =>
    child.once('exit', () => {
      r();
      wake?.();
    }),
  );
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  });
  const deadline = Date.now() + ms;
  while (!out.includes('Server startup in')) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`tomcat exited: ${out.slice(-2000)}`);
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`tomcat did not start within ${ms} ms: ${out.slice(-2000)}`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, left);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
    });
  }
  return { port, output: () => out };
}
