// Starts dynalite (the pinned, open-source DynamoDB engine) in memory on
// loopback and prints its port on stdout once it is listening. Tables become
// ACTIVE at once so tests never wait on them.
//
//   node dynalite.js [port] [--until-stdin-closes]
//
// The port defaults to 0, a free one. With --until-stdin-closes it also
// exits when its stdin reaches end of file: ddbtest, in Go, keeps the other
// end of that pipe, which the kernel closes however the test binary ends,
// so a crashed test binary cannot leave dynalite running. The scripts start
// it in the background, where stdin is /dev/null, and stop it by signal.
'use strict';
const dynalite = require('dynalite');

const args = process.argv.slice(2);
const untilStdinCloses = args.includes('--until-stdin-closes');
const port = Number(args.find((a) => !a.startsWith('--')) || 0);

// dynalite rethrows the error of a request whose client went away (the AWS
// SDK aborts a request when its context times out), and that would end the
// engine for the rest of a test run. Such an error concerns one request
// only; anything else still stops the engine.
process.on('uncaughtException', (err) => {
  if (err && (err.message === 'aborted' || err.code === 'ECONNRESET')) return;
  process.stderr.write(((err && err.stack) || String(err)) + '\n');
  process.exit(1);
});

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(server.address().port + '\n');
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
if (untilStdinCloses) {
  // Tables live in memory only: there is nothing to flush, and waiting for
  // idle keep-alive connections would only delay the exit.
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
