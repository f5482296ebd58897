// consumer-lock.mjs - writes a consumer project's package.json and package-lock.json, so that
// `npm ci --offline` there installs the packed client from the packages `npm ci` of the client
// cached, and nothing else.
//
// Why a lock: npm resolves a version range, even an exact one, from the registry's metadata,
// which `npm ci` never fetches (it downloads tarballs by the lock's integrity). With a lock,
// `npm ci --offline` needs only those tarballs. The lock is the client's own, restricted to
// what the consumer installs: the client's dependencies and typescript and @types/node (which
// check consumer.ts), with every version and integrity copied, plus the tarball itself.
// Usage: node consumer-lock.mjs PACKAGE_DIR TARBALL CONSUMER_DIR
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const [pkgDir, tarball, consumerDir] = process.argv.slice(2);
if (!consumerDir) {
  console.error('usage: consumer-lock.mjs PACKAGE_DIR TARBALL CONSUMER_DIR');
  process.exit(2);
}
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const lock = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package-lock.json'), 'utf8'));
if (lock.lockfileVersion !== 3) throw new Error(`lockfileVersion ${lock.lockfileVersion}, not 3`);

const spec = `file:${path.relative(consumerDir, tarball)}`;
const integrity = `sha512-${createHash('sha512').update(fs.readFileSync(tarball)).digest('base64')}`;
const devDependencies = {
  typescript: pkg.devDependencies.typescript,
  '@types/node': pkg.devDependencies['@types/node'],
};

// The closure of names under the client's lock: every package the client's build hoisted to
// the top of node_modules (these are), with its dependencies and peer dependencies.
function closure(names, dev, into) {
  const todo = [...names];
  while (todo.length > 0) {
    const name = todo.pop();
    const key = `node_modules/${name}`;
    const entry = lock.packages[key];
    if (!entry) throw new Error(`${name} is not at the top of the client's lock`);
    if (into[key]) continue; // the run-time closure is taken first: it stays run time
    const copy = { ...entry };
    delete copy.dev;
    delete copy.devOptional;
    if (dev) copy.dev = true;
    into[key] = copy;
    todo.push(...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.peerDependencies ?? {}));
  }
}

const packages = {};
closure(Object.keys(pkg.dependencies), false, packages);
closure(Object.keys(devDependencies), true, packages);
const consumer = {
  name: `${pkg.name}-consumer`,
  private: true,
  type: 'module',
  dependencies: { [pkg.name]: spec },
  devDependencies,
};
const consumerLock = {
  name: consumer.name,
  lockfileVersion: 3,
  requires: true,
  packages: {
    '': { name: consumer.name, dependencies: consumer.dependencies, devDependencies },
    [`node_modules/${pkg.name}`]: {
      version: pkg.version,
      resolved: spec,
      integrity,
      license: pkg.license,
      dependencies: pkg.dependencies,
      engines: pkg.engines,
    },
    ...Object.fromEntries(Object.entries(packages).sort(([a], [b]) => a.localeCompare(b))),
  },
};
fs.writeFileSync(path.join(consumerDir, 'package.json'), `${JSON.stringify(consumer, null, 2)}\n`);
fs.writeFileSync(path.join(consumerDir, 'package-lock.json'), `${JSON.stringify(consumerLock, null, 2)}\n`);
