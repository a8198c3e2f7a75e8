/**
 * A CSDS client as tools like grpcdebug are: @grpc/grpc-js with Envoy's
 * csds.proto loaded by @grpc/proto-loader (nothing shared with the server's
 * encoder).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import path from 'node:path';

const xdsDir = path.dirname(createRequire(import.meta.url).resolve('@grpc/grpc-js-xds/package.json'));
const includeDirs = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xdsDir, 'deps', d));

export interface CsdsResource {
  type_url: string;
  name: string;
  version_info: string;
  config_status: string;
  client_status: string;
  error_state: { details: string; version_info: string } | null;
  last_updated: { seconds: string; nanos: number } | null;
  /** The resource as sent, when the request did not exclude contents. */
  xds_config: { type_url: string; value: Buffer } | null;
}

export interface CsdsClientConfig {
  node: {
    id: string;
    cluster: string;
    user_agent_name: string;
    locality: { region: string; zone: string; sub_zone: string };
  };
  generic_xds_configs: CsdsResource[];
  client_scope: string;
}

export interface CsdsResponse {
  config: CsdsClientConfig[];
}

type Service = grpc.ServiceClientConstructor;

function csdsCtor(): Service {
  const def = protoLoader.loadSync('envoy/service/status/v3/csds.proto', {
    includeDirs,
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { status: { v3: { ClientStatusDiscoveryService: Service } } } };
  };
  return pkg.envoy.service.status.v3.ClientStatusDiscoveryService;
}

export class CsdsClient {
  private readonly client: grpc.Client & Record<string, unknown>;

  constructor(address: string) {
    const Ctor = csdsCtor();
    this.client = new Ctor(address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, unknown>;
  }

  fetch(request: object = {}): Promise<CsdsResponse> {
    const fetch = this.client['FetchClientStatus'] as (
      req: object,
      cb: (err: grpc.ServiceError | null, res: CsdsResponse) => void,
    ) => void;
    return new Promise((resolve, reject) =>
      fetch.call(this.client, request, (err, res) => (err ? reject(err) : resolve(res))),
    );
  }

  /** Opens StreamClientStatus, sends each request and collects one response per request. */
  async stream(requests: readonly object[]): Promise<CsdsResponse[]> {
    const open = this.client['StreamClientStatus'] as () => grpc.ClientDuplexStream<object, CsdsResponse>;
    const call = open.call(this.client);
    const out: CsdsResponse[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (r: CsdsResponse) => {
        out.push(r);
        if (out.length === requests.length) call.end();
      });
      call.on('error', reject);
      call.on('end', () => resolve());
    });
    for (const r of requests) call.write(r);
    await done;
    return out;
  }

  close(): void {
    this.client.close();
  }
}
