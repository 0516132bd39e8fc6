/** The admin API: where it listens, who may call it, what it keeps. */
import { Nullable, Section, Type, type Static } from './kit';

export const AdminSchema = Section(
  {
    /**
     * Admin API address (never a data port). `null` disables it. The environment variable
     * IPGATE_ADMIN_LISTEN, when set and not empty, replaces it (the chart sets it to the pod IP:
     * config/load.ts).
     */
    listen: Nullable(Type.String(), { default: '127.0.0.1:9901' }),
    /**
     * File holding the bearer token (takes precedence over `tokenEnv`), relative to the config
     * file's directory unless absolute; null: none.
     */
    tokenFile: Nullable(Type.String(), { default: null }),
    /** Environment variable holding the bearer token. */
    tokenEnv: Type.String({ minLength: 1, default: 'IPGATE_ADMIN_TOKEN' }),
    /**
     * File of named tokens (relative to the config file's directory unless absolute), one
     * `name:token` per line (`#` comments): the name is the audit log's
     * "who"; null: none. The token from `tokenFile` / `tokenEnv` is named `admin`. With no token at
     * all, every authenticated route is refused (health, readiness and metrics still answer).
     */
    tokensFile: Nullable(Type.String(), { default: null }),
    /** Audit records kept in memory for `GET /v1/audit` (the log lines are the durable record). */
    auditHistory: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1000 }),
    /** Largest request body, bytes. */
    bodyLimit: Type.Integer({ minimum: 1024, maximum: 67_108_864, default: 1_048_576 }),
    /**
     * With `workers: 1`: run the admin API in its own process (a primary holding the store, the admin
     * API and `/metrics`) and the listeners in one cluster worker, as `workers >= 2` always does.
     * false: one process. The split was the rule while the HTTP data path ran on node:http, which an
     * admin request in the same process slowed; the data path has no node:http now, and one process
     * measured the same work per CPU-second as two while using 57-83 MiB less (bench/README.md
     * "One HTTP engine, one process"). Ignored with `listen: null` (one process) and with
     * `workers` above 1 (always separate).
     */
    separateProcess: Type.Boolean({ default: false }),
    /**
     * Host names, besides IP literals and `localhost`, that the admin API answers (the Host header,
     * compared case-insensitively, its port ignored); any other Host gets 421. A DNS rebinding page
     * can reach a loopback or pod address through a browser, but its Host is still the attacker's
     * name: list here the names clients really use, such as the admin Service's
     * `ipgate-admin.ipgate.svc` and `ipgate-admin.ipgate.svc.cluster.local`. No ports, no wildcards.
     */
    allowedHosts: Type.Array(Type.String(), { maxItems: 256, default: [] }),
  },
  { default: {} },
);

export type AdminConfig = Static<typeof AdminSchema>;
