// web_broker.mjs: what web_e2e.mjs runs besides the browser: a real
// mosquitto with the plugin on free loopback ports with a temporary store,
// killed and restarted at will, and what serves the page: the broker itself
// (http_dir on its websockets listener, Mosquitto 2.0), or, where the broker
// does not serve http_dir (2.1's builtin websockets), Debian's nginx serving
// clients/web and passing /mqtt to the broker's websockets listener, as
// docs/web.md tells an operator to; mqchat (Paho MQTT C) runs; and the log
// with the time since the start. Every wait is bounded.
//
// CHAT_BROKER_PRELOAD, when set, becomes the broker's LD_PRELOAD (an
// AddressSanitizer plugin in an uninstrumented broker).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

const T0 = performance.now();

export function log(...a) {
  console.log(`[${((performance.now() - T0) / 1000).toFixed(1)}s]`, ...a);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* ------------------------------------------------------------------------
 * The broker
 * ---------------------------------------------------------------------- */

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.setTimeout(500);
    s.on('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.on('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

export function httpGet(port, p) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.on('timeout', () => {
      req.destroy();
      resolve({ status: 0, body: '' });
    });
  });
}

/* The version of the mosquitto at path, from `mosquitto -h`, as 10000 *
 * major + 100 * minor + patch (20011 for 2.0.11). */
export function brokerVersion(path) {
  const r = spawnSync(path, ['-h'], { encoding: 'utf8', timeout: 10_000 });
  const m = /mosquitto version (\d+)\.(\d+)\.(\d+)/.exec(`${r.stdout}${r.stderr}`);
  if (!m) throw new Error(`no version in the output of ${path} -h`);
  return Number(m[1]) * 10000 + Number(m[2]) * 100 + Number(m[3]);
}

/* nginx in front of the broker: serves the page's files and passes /mqtt
 * (websockets) to the broker's websockets listener, from one origin, so the
 * page's default broker address is right. Runs in the foreground, one
 * process, everything in dir; stays up while the broker restarts. */
class Nginx {
  constructor(dir, opts) {
    this.dir = dir;
    this.opts = opts;
    this.proc = null;
  }

  async start(wsPort) {
    const conf = path.join(this.dir, 'nginx.conf');
    const tmp = path.join(this.dir, 'nginx-tmp');
    fs.mkdirSync(tmp, { recursive: true });
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = await freePort();
      const lines = [
        '# Written by tests/web/web_broker.mjs (docs/web.md, Mosquitto 2.1).',
        'daemon off;',
        'master_process off;',
        'worker_processes 1;',
        `pid ${path.join(this.dir, 'nginx.pid')};`,
        `error_log ${path.join(this.dir, 'nginx.log')} notice;`,
        'events { worker_connections 256; }',
        'http {',
        '  include /etc/nginx/mime.types;',
        '  access_log off;',
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
          (t) => `  ${t}_temp_path ${path.join(tmp, t)};`),
        '  server {',
        `    listen 127.0.0.1:${this.port};`,
        `    root ${path.resolve(this.opts.web)};`,
        '    location /mqtt {',
        `      proxy_pass http://127.0.0.1:${wsPort};`,
        '      proxy_http_version 1.1;',
        '      proxy_set_header Upgrade $http_upgrade;',
        '      proxy_set_header Connection "upgrade";',
        '      proxy_read_timeout 1d;',
        '      proxy_send_timeout 1d;',
        '    }',
        '  }',
        '}',
      ];
      fs.writeFileSync(conf, lines.join('\n') + '\n');
      const out = fs.openSync(path.join(this.dir, 'nginx.out'), 'a');
      this.proc = spawn(this.opts.nginx, ['-p', this.dir, '-e', path.join(this.dir, 'nginx.log'), '-c', conf],
        { stdio: ['ignore', out, out] });
      fs.closeSync(out);
      this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
      this.proc.on('exit', () => (this.proc = null));
      const deadline = performance.now() + 10_000;
      while (performance.now() < deadline && this.proc) {
        if ((await httpGet(this.port, '/')).status === 200) {
          log(`nginx pid ${this.proc.pid}: http 127.0.0.1:${this.port}, /mqtt to 127.0.0.1:${wsPort}`);
          return;
        }
        await sleep(50);
      }
      if (this.proc) throw new Error(`nginx not ready on ${this.port} after 10 s\n${this.tail()}`);
      log('nginx exited at start, trying another port\n' + this.tail());
    }
    throw new Error('nginx did not start in 5 attempts');
  }

  async stop() {
    if (this.nginx) await this.nginx.stop();
    if (!this.proc) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc && this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }

  tail() {
    let s = '';
    for (const f of ['nginx.out', 'nginx.log']) {
      try {
        s += `--- ${f} (tail)\n` +
          fs.readFileSync(path.join(this.dir, f), 'utf8').split('\n').slice(-20).join('\n') + '\n';
      } catch (e) {
        /* not written yet */
      }
    }
    return s;
  }
}

export class Broker {
  /* extra: more mosquitto.conf lines. opts.serve: 'broker' (http_dir) or
   * 'nginx' (see Nginx). */
  constructor(dir, opts, extra = []) {
    this.dir = dir;
    this.opts = opts;
    this.extra = extra;
    this.conf = path.join(dir, 'mosquitto.conf');
    this.logFile = path.join(dir, 'mosquitto.log');
    this.db = path.join(dir, 'db');
    this.proc = null;
    this.nginx = opts.serve === 'nginx' ? new Nginx(dir, opts) : null;
    fs.mkdirSync(this.db, { recursive: true });
  }

  /* The port the page is loaded from. */
  get httpPort() {
    return this.nginx ? this.nginx.port : this.wsPort;
  }

  writeConf() {
    const lines = [
      '# Written by tests/web/web_e2e.mjs.',
      `listener ${this.port} 127.0.0.1`,
      `listener ${this.wsPort} 127.0.0.1`,
      'protocol websockets',
      /* Mosquitto 2.0's websockets (libwebsockets) would listen on every
       * address for "127.0.0.1" without it. */
      'socket_domain ipv4',
      ...(this.nginx ? [] : [`http_dir ${path.resolve(this.opts.web)}`]),
      ...(this.extra.length ? this.extra : ['allow_anonymous true']),
      'set_tcp_nodelay true',
      'persistence false',
      `log_dest file ${this.logFile}`,
      'log_type all',
      `plugin ${path.resolve(this.opts.plugin)}`,
      `plugin_opt_db_path ${this.db}`,
    ];
    /* Run as root (CI), mosquitto would drop to "mosquitto", which cannot
     * write the temporary store. */
    if (process.getuid && process.getuid() === 0) lines.push('user root');
    fs.writeFileSync(this.conf, lines.join('\n') + '\n');
  }

  launch() {
    const env = { ...process.env };
    if (process.env.CHAT_BROKER_PRELOAD) {
      env.LD_PRELOAD = process.env.CHAT_BROKER_PRELOAD;
      /* Mosquitto 2.0.11 never frees what mosq_websockets_init allocates for
       * http_dir (4 KiB, once): not ours, so suppressed by name, which
       * LeakSanitizer sees only with the slow (full) unwinder. Everything
       * else, the plugin's allocations included, stays checked. */
      const supp = path.join(this.dir, 'lsan.supp');
      fs.writeFileSync(supp, 'leak:mosq_websockets_init\n');
      env.LSAN_OPTIONS = [process.env.LSAN_OPTIONS, 'suppressions=' + supp].filter(Boolean).join(':');
      env.ASAN_OPTIONS = [process.env.ASAN_OPTIONS, 'fast_unwind_on_malloc=0'].filter(Boolean).join(':');
    }
    const out = fs.openSync(path.join(this.dir, 'broker.out'), 'a');
    this.proc = spawn(this.opts.mosquitto, ['-c', this.conf], { env, stdio: ['ignore', out, out] });
    fs.closeSync(out);
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
    this.proc.on('exit', () => (this.proc = null));
  }

  /* Starts on this.port/this.wsPort; false if it exited at start. */
  async startOnPorts() {
    this.launch();
    const deadline = performance.now() + 60_000; /* sanitizer builds start slowly, more so beside other tests */
    while (performance.now() < deadline) {
      if (!this.proc) return false;
      if (this.nginx) {
        if ((await canConnect(this.port)) && (await canConnect(this.wsPort))) return true;
      } else if ((await canConnect(this.port)) && (await httpGet(this.wsPort, '/')).status === 200) {
        return true;
      }
      await sleep(50);
    }
    throw new Error(`broker not ready on ${this.port}/${this.wsPort} after 60 s\n${this.tail()}`);
  }

  async start() {
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = await freePort();
      this.wsPort = await freePort();
      this.writeConf();
      if (await this.startOnPorts()) {
        log(`broker pid ${this.proc.pid}: mqtt 127.0.0.1:${this.port}, ` +
          `${this.nginx ? 'ws' : 'http+ws'} 127.0.0.1:${this.wsPort}`);
        if (this.nginx) await this.nginx.start(this.wsPort);
        return;
      }
      log('broker exited at start, trying other ports\n' + this.tail());
    }
    throw new Error('broker did not start in 5 attempts');
  }

  async kill() {
    if (!this.proc) return;
    const pid = this.proc.pid;
    this.proc.kill('SIGKILL');
    await this.exited;
    log(`broker pid ${pid} killed with SIGKILL`);
  }

  async restart() {
    for (let attempt = 0; attempt < 20; attempt++) {
      if (await this.startOnPorts()) {
        log(`broker restarted, pid ${this.proc.pid}`);
        return;
      }
      await sleep(250); /* the ports were ours a moment ago */
    }
    throw new Error('broker did not restart\n' + this.tail());
  }

  async stop() {
    if (!this.proc) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc && this.proc.kill('SIGKILL'), 5000);
    const { code, sig } = await this.exited;
    clearTimeout(t);
    if (code !== 0) throw new Error(`broker exited with ${code ?? sig}\n${this.tail()}`);
  }

  tail() {
    let s = this.nginx ? this.nginx.tail() : '';
    for (const f of [path.join(this.dir, 'broker.out'), this.logFile]) {
      try {
        s += `--- ${f} (tail)\n` + fs.readFileSync(f, 'utf8').split('\n').slice(-40).join('\n') + '\n';
      } catch (e) {
        /* not written yet */
      }
    }
    return s;
  }
}

/* mqchat (Paho MQTT C): resolves with its exit code and output. */
export function mqchat(opts, broker, args, input, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    const p = spawn(opts.mqchat, ['-h', '127.0.0.1', '-p', String(broker.port), '--quiet', ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`mqchat ${args.join(' ')}: no exit after ${timeoutMs} ms`));
    }, timeoutMs);
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out, err });
    });
    p.stdin.end(input || '');
  });
}

export async function mqchatOk(opts, broker, args, input) {
  const r = await mqchat(opts, broker, args, input);
  assert.equal(r.code, 0, `mqchat ${args.join(' ')} exited ${r.code}: ${r.err}`);
  return r;
}
